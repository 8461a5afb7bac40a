// The simd track's staged rows (knobs `stream` and `stage_rows`): an output that nothing reads back, written
// in whole rows, is computed in blocks into a buffer in L1 and written out from there, by non-temporal
// stores when it is 16 MiB or more (cake_stream_out), by vector conversions when it is bf16 or f16
// (cake_put_bf16 / _f16). Its bits must be the plain stores' in every dtype, NaNs, infinities and bf16
// subnormals included, on rows whose starts fall anywhere in a cache line and whose ends leave a partial
// block and a partial line; only whole rows of such outputs are staged; and the kernel must really store
// non-temporally.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"
#include "target/machine.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStaged = "the row staged:";
const nlohmann::json kPlain = {{"stream", "off"}, {"stage_rows", false}};

CheckedContract bench_op(const std::string& name) {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (name + ".yaml")).string());
}

bool offered() {
  return target::describe_machine().isa.avx512f;  // the knobs are offered only there
}

// Non-temporal stores (VMOVNTDQ) in the library's disassembly (objdump; -1 where it cannot run).
int streaming_stores(const fs::path& library) {
  return testing_simd::disassembly_lines(
      library, [](const std::string& line) { return line.find("vmovntdq") != std::string::npos; });
}

// Case of op with its `row` size n and, when `big`, rows enough for 16 MiB of output (every other size 1).
cases::Case make(const CheckedContract& c, const std::string& row, const std::string& outer, int64_t n,
                 bool big, DType dt) {
  std::map<std::string, int64_t> sizes;
  for (const SizeInfo& z : c.sizes)
    if (z.free) sizes[z.name] = 1;
  sizes[row] = n;
  sizes[outer] = big ? ((INT64_C(16) << 20) / dtype_size(dt) + n - 1) / n : 37;
  return cases::make_case(c, sizes, dt);
}

// Op built with `knobs` (marked as staged) and plain, on rows of 4099 and 1031 elements (starts anywhere in
// a line, a partial block and line at the end), 4096 (whole blocks), 127 (a short row under 256 bytes) and
// 33 (under the 64 a conversion needs), at 16 MiB of output and in cache: the same bits, NaNs and -infs
// included.
void expect_plain_bits(const std::string& op, const std::string& row, const std::string& outer,
                       const nlohmann::json& knobs) {
  const CheckedContract c = bench_op(op);
  std::string src_on, src_off;
  const build::BuildResult on = testing_simd::lower_and_build(c, knobs, &src_on),
                           off = testing_simd::lower_and_build(c, kPlain, &src_off);
  ASSERT_TRUE(on.ok() && off.ok()) << on.failure << off.failure;
  ASSERT_NE(src_on.find(kStaged), std::string::npos) << op << ": not staged\n" << src_on;
  ASSERT_EQ(src_off.find(kStaged), std::string::npos) << op;
  const build::Kernel k_on(on.library), k_off(off.library);
  for (const DType dt : c.contract.dtypes) {
    for (const int64_t n : {int64_t{4099}, int64_t{4096}, int64_t{1031}, int64_t{127}, int64_t{33}}) {
      for (const bool big : {true, false}) {
        const cases::Case k = make(c, row, outer, n, big, dt);
        const std::string diff = testing_simd::first_difference(k_on, k_off, c, k);
        EXPECT_TRUE(diff.empty()) << op << " " << knobs.dump() << " " << k.describe() << ": " << diff;
      }
    }
  }
}

TEST(StagedRows, StreamedAddGivesThePlainStoresBits) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  expect_plain_bits("add", "N", "M", {{"stream", "all"}, {"stage_rows", false}});
}

TEST(StagedRows, ConvertedAddGivesThePlainStoresBits) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  expect_plain_bits("add", "N", "M", {{"stream", "all"}, {"stage_rows", true}});
  expect_plain_bits("add", "N", "M", {{"stream", "off"}, {"stage_rows", true}});
}

TEST(StagedRows, FusedRowsGiveThePlainStoresBits) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  expect_plain_bits("rms_norm", "D", "N", {{"stream", "all"}, {"stage_rows", true}});
}

// bf16 subnormals, which VCVTNE2PS2BF16 would flush to zero: z = x + 0 for x subnormal, between normal
// values, in every group of 32 or in some only.
TEST(StagedRows, Bf16SubnormalsKeepTheirBits) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  const CheckedContract c = bench_op("add");
  std::string src;
  const build::BuildResult on = testing_simd::lower_and_build(c, {{"stage_rows", true}}, &src),
                           off = testing_simd::lower_and_build(c, kPlain, &src);
  ASSERT_TRUE(on.ok() && off.ok());
  const build::Kernel k_on(on.library), k_off(off.library);
  const cases::Case k = make(c, "N", "M", 4096, false, DType::bf16);
  std::vector<Tensor> in = cases::make_inputs(c, k);
  for (int64_t i = 0; i < in[1].numel(); ++i)
    if (i % 3 == 0) in[1].set(i, 0.0);
  for (int64_t i = 0; i < in[0].numel(); i += i < 40000 ? 7 : 4099)
    in[0].set(i, std::ldexp(i % 2 ? -3.0 : 5.0, -130));
  const std::string diff = testing_simd::difference_on(k_on, k_off, c, k, in);
  EXPECT_TRUE(diff.empty()) << diff;
}

// Each thread of a region that streams fences before the region's barrier: the first fence after a staged
// row comes before the region closes, not only at the kernel's return.
TEST(StagedRows, EveryStreamingRegionFencesBeforeItsBarrier) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  for (const char* op : {"add", "rms_norm"}) {
    const std::string src = testing_simd::lower_simd(bench_op(op), {{"stream", "all"}}).files.front().text;
    const size_t staged = src.find(kStaged);
    ASSERT_NE(staged, std::string::npos) << op;
    const size_t fence = src.find("cake_stream_fence();", staged);
    ASSERT_NE(fence, std::string::npos) << op;
    EXPECT_LT(fence, src.find("return err;", staged)) << op;
    const size_t after = src.find_first_not_of(" \n", fence + std::string("cake_stream_fence();").size());
    EXPECT_EQ(src.compare(after, 1, "}"), 0) << op << ": the fence does not close a region\n" << src;
    EXPECT_NE(src.compare(after, 11, "return err;"), 0) << op;
  }
}

TEST(StagedRows, TheKernelStoresNonTemporallyOnlyWhenAsked) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  const CheckedContract c = bench_op("add");
  std::string src;
  const build::BuildResult on = testing_simd::lower_and_build(c, {{"stream", "all"}}, &src),
                           off = testing_simd::lower_and_build(c, {{"stream", "off"}}, &src);
  ASSERT_TRUE(on.ok() && off.ok());
  const int stores = streaming_stores(on.library);
  if (stores < 0) GTEST_SKIP() << "objdump did not run";
  EXPECT_GT(stores, 0);
  EXPECT_EQ(streaming_stores(off.library), 0);
}

// Which statements are staged: whole rows of outputs nothing reads, no reduction in the element, not 1-byte
// elements (their overlapped chunks); streamed by default (`wide`) only where the elements have 4 or more
// bytes.
TEST(StagedRows, OnlyWholeRowsOfOutputsNothingReadsAreStaged) {
  if (!offered()) GTEST_SKIP() << "no AVX-512 here: the knobs are not offered";
  const auto staged = [](const CheckedContract& c, const nlohmann::json& knobs) {
    return testing_simd::lower_simd(c, knobs).files.front().text.find(kStaged) != std::string::npos;
  };
  EXPECT_TRUE(staged(bench_op("add"), {{"stream", "all"}, {"stage_rows", false}}));
  EXPECT_TRUE(staged(bench_op("softmax"), nlohmann::json::object()));
  EXPECT_TRUE(staged(bench_op("permute"), {{"stream", "all"}}));         // a copy of bits, streamed
  EXPECT_FALSE(staged(bench_op("permute"), {{"stream", "off"}}));        // not converted
  EXPECT_FALSE(staged(bench_op("reduce_sum"), {{"stream", "all"}}));     // a reduction in the element
  EXPECT_FALSE(staged(bench_op("quantize_int8"), {{"stream", "all"}}));  // 1-byte elements
  const std::string wide = testing_simd::lower_simd(bench_op("add"), {{"stream", "wide"}}).files.front().text;
  EXPECT_NE(wide.find("if (const bool st_nt = sizeof(T) >= 4 && "), std::string::npos);
  const std::string file = (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "add.yaml").string();
  // The output read back by a second statement: held in a buffer, not staged (fusion off: each statement
  // has its own nest with an innermost loop).
  const CheckedContract read_back = testing_simd::contract_with(
      file, {{"outputs: { z: [M, N] }", "outputs: { z: [M, N], w: [M, N] }"},
             {"z[m, n] = x[m, n] + y[n]", "z[m, n] = x[m, n] + y[n]\n  w[m, n] = 2 * z[m, n]"}});
  const std::string src =
      testing_simd::lower_simd(read_back, {{"stream", "all"}, {"fusion", "none"}}).files.front().text;
  EXPECT_NE(src.find("IO::put(&t_w["), std::string::npos) << src;
  EXPECT_EQ(src.find("IO::put(&t_z["), std::string::npos) << src;
}

}  // namespace
}  // namespace cake
