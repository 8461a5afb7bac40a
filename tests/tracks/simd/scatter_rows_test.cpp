// The simd track's scatter into data-chosen rows (index_add: out[idx[i], j] += src[i, j]) with
// scatter_rows: the points are sorted by target row and each row is summed once in a per-thread row of
// accumulators. Each row's points are summed in ascending order, as the buffered scatter (scatter_rows =
// false) sums them, so both kernels must give bit-identical outputs, NaNs included: with one row or
// thousands, rows that receive nothing, rows split into blocks across threads (fewer rows than threads),
// the serial copy, and several row and column axes in any order. An index out of range is reported and
// its point skipped in both.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>

#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;
using testing_simd::lower_and_build;

// Two row axes (a, b) and two column axes, stored in the other order than the source's.
const char* kScatter2 = R"(name: scatter2
level: 3
dtypes: [f32, bf16]
inputs:  { src: [A, B, C, E], idx: "i64[A, B]" }
outputs: { out: [V, E, C] }
compute: |
  out[idx[a, b], e, c] += src[a, b, c, e] * 2
cases:
  standard: { shapes: { A: [1, 3], B: [5, 40], C: [4, 130], E: [7], V: [1, 6, 300] } }
  values:   { src: normal(0, 1), idx: randint(0, V) }
)";

struct Pair {
  build::Kernel sorted, buffered;
};

// The contract's kernels with scatter_rows on and off; nullopt (and a failure) when either does not build
// or the sorted one does not take the sorted path.
std::optional<Pair> kernels(const CheckedContract& c) {
  std::string on_src, off_src;
  const build::BuildResult on = lower_and_build(c, {{"scatter_rows", "true"}}, &on_src),
                           off = lower_and_build(c, {{"scatter_rows", "false"}}, &off_src);
  EXPECT_TRUE(on.ok()) << on.failure << "\n" << on.log;
  EXPECT_TRUE(off.ok()) << off.failure << "\n" << off.log;
  EXPECT_NE(on_src.find("points sorted by target row"), std::string::npos);
  EXPECT_EQ(off_src.find("points sorted by target row"), std::string::npos);
  if (!on.ok() || !off.ok()) return std::nullopt;
  return Pair{build::Kernel(on.library), build::Kernel(off.library)};
}

CheckedContract index_add() {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "scatter_add.yaml").string());
}

TEST(ScatterRows, BitIdenticalToTheBufferedScatter) {
  const CheckedContract c = index_add();
  const std::optional<Pair> k = kernels(c);
  ASSERT_TRUE(k);
  // {N, D, V}: the serial copy; one row (unsplit, then split across threads); few rows of long rows
  // (split); fewer points than rows / 16 (sorted by comparison), without and with repeated rows; more
  // points than rows.
  for (const auto& [n, d, v] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{7, 1, 100},
                                                                                  {8192, 13, 1},
                                                                                  {3000, 1024, 1},
                                                                                  {3000, 300, 3},
                                                                                  {20, 8, 5000},
                                                                                  {300, 5, 5000},
                                                                                  {20000, 33, 700}}) {
    for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
      const cases::Case kc = cases::make_case(c, {{"N", n}, {"D", d}, {"V", v}}, dt);
      EXPECT_EQ(first_difference(k->sorted, k->buffered, c, kc), "");
    }
  }
}

TEST(ScatterRows, AnyRowAndColumnAxes) {
  const CheckedContract c = check_contract(load_contract_text(kScatter2));
  const std::optional<Pair> k = kernels(c);
  ASSERT_TRUE(k);
  for (const eval::CaseOutcome& o : eval::check_kernel(k->sorted, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
  for (const cases::Case& kc : cases::make_cases(c, cases::Set::Standard))
    EXPECT_EQ(first_difference(k->sorted, k->buffered, c, kc), "");
}

TEST(ScatterRows, AnIndexOutOfRangeIsReportedAndSkipped) {
  const CheckedContract c = index_add();
  const std::optional<Pair> k = kernels(c);
  ASSERT_TRUE(k);
  for (const auto& [n, d, v] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{7, 3, 10}, {7, 3, 1000}, {5000, 40, 9}}) {
    const cases::Case kc = cases::make_case(c, {{"N", n}, {"D", d}, {"V", v}}, DType::f32);
    for (const auto& [at, bad] : {std::pair<int64_t, int64_t>{0, v}, {n - 1, v}, {n / 2, -1}}) {
      std::vector<Tensor> in = cases::make_inputs(c, kc);
      static_cast<int64_t*>(in[1].data())[at] = bad;
      std::vector<Tensor> a = cases::make_outputs(c, kc), b = cases::make_outputs(c, kc);
      const std::vector<double> params = cases::kernel_params(c, kc);
      EXPECT_EQ(k->sorted.run(in, a, params), CAKE_ERR_INDEX) << kc.describe() << " idx[" << at << "]";
      EXPECT_EQ(k->buffered.run(in, b, params), CAKE_ERR_INDEX);
      for (int64_t i = 0; i < a[0].numel(); ++i)
        ASSERT_TRUE(testing_simd::same_bits(a[0], b[0], i)) << kc.describe() << " element " << i;
    }
  }
}

}  // namespace
}  // namespace cake
