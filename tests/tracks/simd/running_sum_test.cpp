// The simd track's running sums (knob scan): a sum whose upper bound rises by one with the innermost axis
// (cumsum's sum(k in 0..j + 1: x[n, k])) carries its accumulator along that axis instead of summing each
// prefix anew. It adds the same terms in the same order and type as the sequential reduction, so with
// vectorized reductions off on both sides the two kernels must give bit-identical outputs, NaNs included.
// Vectorized (the default: blocks of outputs summed by shift-and-add in vector registers, plus the carry),
// the kernel must pass the gate on the standard cases and on rows shorter than, at and past a block. Bounds
// other than cumsum's (an exclusive prefix, a prefix that starts late and is empty for the first outputs) and
// an expression around the sum are covered by contracts written here (their padded reads: the body keeps its
// bounds tests).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "core/paths.h"
#include "eval/conformance.h"
#include "eval/precision.h"
#include "kernel_pair.h"
#include "reference/reference.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;
using testing_simd::lower_and_build;

const fs::path kCumsum = fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "cumsum.yaml";

// bench/ops/cumsum.yaml with its compute line replaced (empty: as it is).
CheckedContract cumsum_with(const std::string& compute) {
  std::string yaml = read_file(kCumsum).value_or("");
  if (!compute.empty()) {
    const std::string old = "y[n, j] = sum(k in 0..j+1: x[n, k])";
    const size_t at = yaml.find(old);
    EXPECT_NE(at, std::string::npos);
    yaml.replace(at, old.size(), compute);
  }
  return check_contract(load_contract_text(yaml, kCumsum.string()));
}

class RunningSum : public ::testing::TestWithParam<std::string> {};

TEST_P(RunningSum, BitIdenticalToTheSequentialSumAndPassesTheGate) {
  const CheckedContract c = cumsum_with(GetParam());
  std::string scan_src, sum_src, default_src;
  const build::BuildResult scan = lower_and_build(c, {{"scan", "true"}, {"vectorize", "false"}}, &scan_src),
                           sum = lower_and_build(c, {{"scan", "false"}, {"vectorize", "false"}}, &sum_src),
                           by_default = lower_and_build(c, nlohmann::json::object(), &default_src);
  ASSERT_TRUE(scan.ok()) << scan.failure << "\n" << scan.log;
  ASSERT_TRUE(sum.ok()) << sum.failure << "\n" << sum.log;
  ASSERT_TRUE(by_default.ok()) << by_default.failure << "\n" << by_default.log;
  EXPECT_NE(scan_src.find("scan0_next"), std::string::npos) << "the running sum is generated";
  EXPECT_EQ(sum_src.find("scan0_next"), std::string::npos);
  EXPECT_NE(default_src.find("scan0_next"), std::string::npos) << "running sums are on by default";
  const build::Kernel k_scan(scan.library), k_sum(sum.library), k_default(by_default.library);

  for (const eval::CaseOutcome& o : eval::check_kernel(k_default, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
  // Rows of 1 and 2 (no term or one past the first output), 17 (no vector block), 33 (one, f64) and 300
  // (blocks and a tail); the serial and parallel paths.
  for (const int64_t d : {1, 2, 17, 33, 300}) {
    for (const int64_t n : {1, 7, 5000}) {
      for (const DType dt : {DType::f32, DType::bf16}) {
        const cases::Case k = cases::make_case(c, {{"D", d}, {"N", n}}, dt);
        const std::string diff = first_difference(k_scan, k_sum, c, k);
        ASSERT_TRUE(diff.empty()) << diff;
        // The vectorized running sum (the default) rounds in its own order: the gate, not the bits.
        const std::vector<Tensor> in = cases::make_inputs(c, k);
        std::vector<Tensor> got = cases::make_outputs(c, k);
        ASSERT_EQ(k_default.run(in, got, cases::kernel_params(c, k)), 0) << k.describe();
        const eval::GateResult g = eval::precision_gate(got[0], reference::cached_outputs(c, k)[0]);
        EXPECT_TRUE(g.pass) << k.describe() << ": " << g.str();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bounds, RunningSum,
    ::testing::Values("",  // cumsum as written: sum(k in 0..j+1: x[n, k])
                      "y[n, j] = x[n, j] + sum(k in 0..j: x?[n, k])",
                      "y[n, j] = 0.5 * x[n, j] - sum(k in 2..j - 1: x?[n, k] * x?[n, k])"),
    [](const ::testing::TestParamInfo<std::string>& i) { return std::to_string(i.index); });

TEST(RunningSum, OnlyASumRisingByOneWithTheInnermostAxisIsCarried) {
  // A bound rising by one every other step, and a body that uses j, are summed anew per output.
  for (const std::string compute :
       {"y[n, j] = sum(k in 0..(j + 2) / 2: x[n, k])", "y[n, j] = sum(k in 0..j+1: x[n, k] * j)"}) {
    std::string src;
    const build::BuildResult b = lower_and_build(cumsum_with(compute), nlohmann::json::object(), &src);
    ASSERT_TRUE(b.ok()) << compute << ": " << b.failure << "\n" << b.log;
    EXPECT_EQ(src.find("scan0_next"), std::string::npos) << compute;
  }
}

}  // namespace
}  // namespace cake
