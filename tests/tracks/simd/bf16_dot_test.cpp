// The simd track's bf16 dot-product path (knob bf16_dot): a contraction of two bf16 inputs multiplies
// pairs along k with VDPBF16PS and sums in f32. The knob exists only for operators with a bf16 dtype on
// machines with AVX512-BF16, and is on by default there. With it on, bf16 cases must pass the gate over odd
// K, partial tiles and panels, through both ways of reading A (rows contiguous along k, and a transposed A
// read by stride); f32 cases must keep the bits of the kernel without it; and one crafted case shows the bf16
// sum really rounds in f32 (1 + 2^24 − 2^24 is 0 there and 1 in an f64 sum, with bf16_f32 off as well).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/precision.h"
#include "kernel_pair.h"
#include "reference/reference.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;
using testing_simd::lower_and_build;

const fs::path kMatmul = fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "matmul.yaml";

// bench/ops/matmul.yaml with each `from` replaced by its `to`.
CheckedContract matmul_with(const testing_simd::Edits& edits) {
  return testing_simd::contract_with(kMatmul.string(), edits);
}

TEST(Bf16Dot, InTheKnobSpaceOnlyForBf16OperatorsOnMachinesWithTheInstruction) {
  const target::MachineInfo m = target::describe_machine();
  const tracks::Track& simd = *tracks::find_track("simd");
  EXPECT_EQ(simd.knobs(matmul_with({}), m).find("bf16_dot") != nullptr, m.isa.avx512bf16);
  EXPECT_EQ(simd.knobs(matmul_with({{"[f32, bf16]", "[f32]"}}), m).find("bf16_dot"), nullptr);
  target::MachineInfo without = m;
  without.isa.avx512bf16 = false;
  EXPECT_EQ(simd.knobs(matmul_with({}), without).find("bf16_dot"), nullptr);
}

// Parameter: the contract's edits (none: A rows contiguous along k; or A stored transposed).
class Bf16Dot : public ::testing::TestWithParam<std::vector<std::pair<std::string, std::string>>> {};

TEST_P(Bf16Dot, SumsInF32OnTheDotProductAndPassesTheGate) {
  if (!target::describe_machine().isa.avx512bf16) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const CheckedContract c = matmul_with(GetParam());
  std::string dot_src, plain_src;
  const build::BuildResult dot = lower_and_build(c, nlohmann::json::object(), &dot_src),
                           plain =
                               lower_and_build(c, {{"bf16_dot", "false"}, {"bf16_f32", "false"}}, &plain_src);
  ASSERT_TRUE(dot.ok()) << dot.failure << "\n" << dot.log;
  ASSERT_TRUE(plain.ok()) << plain.failure << "\n" << plain.log;
  EXPECT_NE(dot_src.find("tile_bf16"), std::string::npos) << "on by default";
  EXPECT_EQ(plain_src.find("tile_bf16"), std::string::npos);
  const build::Kernel k_dot(dot.library), k_plain(plain.library);

  // K = 1 and 33 end on half a pair; M = 7 and 13 leave partial tiles of 6 rows, N = 33 and 70 partial
  // panels of 32 columns.
  for (const int64_t kk : {1, 2, 33, 256}) {
    for (const int64_t mm : {1, 7, 13}) {
      for (const int64_t nn : {1, 33, 70}) {
        const cases::Case f32 = cases::make_case(c, {{"M", mm}, {"N", nn}, {"K", kk}}, DType::f32);
        const std::string diff = first_difference(k_dot, k_plain, c, f32);
        EXPECT_TRUE(diff.empty()) << "the f32 instantiation is untouched: " << diff;
        const cases::Case k = cases::make_case(c, {{"M", mm}, {"N", nn}, {"K", kk}}, DType::bf16);
        const std::vector<Tensor> in = cases::make_inputs(c, k);
        std::vector<Tensor> got = cases::make_outputs(c, k);
        ASSERT_EQ(k_dot.run(in, got, cases::kernel_params(c, k)), 0) << k.describe();
        const eval::GateResult g = eval::precision_gate(got[0], reference::cached_outputs(c, k)[0]);
        EXPECT_TRUE(g.pass) << k.describe() << ": " << g.str();
      }
    }
  }

  // c = 1·1 + 2^12·2^12 − 2^12·2^12 + 0: exact in f64; in f32, 2^24 + 1 rounds to 2^24 before the
  // cancellation. Every element of A and B is exact in bf16.
  const cases::Case k = cases::make_case(c, {{"M", 1}, {"N", 1}, {"K", 4}}, DType::bf16);
  std::vector<Tensor> in = cases::make_inputs(c, k);
  const double a[4] = {1, 4096, -4096, 0}, b[4] = {1, 4096, 4096, 0};
  for (int64_t i = 0; i < 4; ++i) {
    in[0].set(i, a[i]);  // a is [1, 4] or [4, 1]: element i is k = i either way
    in[1].set(i, b[i]);
  }
  std::vector<Tensor> out_dot = cases::make_outputs(c, k), out_plain = cases::make_outputs(c, k);
  ASSERT_EQ(k_dot.run(in, out_dot, cases::kernel_params(c, k)), 0);
  ASSERT_EQ(k_plain.run(in, out_plain, cases::kernel_params(c, k)), 0);
  EXPECT_EQ(out_plain[0].get(0), 1.0);
  EXPECT_EQ(out_dot[0].get(0), 0.0) << "the bf16 products were summed in f32 by the dot-product path";
}

INSTANTIATE_TEST_SUITE_P(ReadsOfA, Bf16Dot,
                         ::testing::Values(std::vector<std::pair<std::string, std::string>>{},
                                           std::vector<std::pair<std::string, std::string>>{
                                               {"a: [M, K]", "a: [K, M]"}, {"a[m, k] * b", "a[k, m] * b"}}),
                         [](const auto& info) {
                           return info.param.empty() ? std::string("RowsAlongK") : std::string("Transposed");
                         });

}  // namespace
}  // namespace cake
