// The roofline floor, HAP and the CANN-Bench score against values computed by hand, and the case cost
// (flops, compulsory bytes) the TE gives for contracts whose counts are known in closed form.
#include <gtest/gtest.h>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/paths.h"
#include "eval/score.h"
#include "eval/timing.h"

namespace cake::eval {
namespace {

CheckedContract contract(const std::string& op) {
  return load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/" + op + ".yaml");
}

TEST(CaseCost, MatmulIsTwoMNKFlopsAndItsOperandsOnce) {
  const CheckedContract c = contract("matmul");
  const CaseCost k = case_cost(c, cases::make_case(c, {{"M", 64}, {"N", 32}, {"K", 16}}, DType::f32));
  EXPECT_DOUBLE_EQ(k.flops, 2.0 * 64 * 32 * 16);
  EXPECT_DOUBLE_EQ(k.bytes_read, (64.0 * 16 + 16 * 32) * 4);
  EXPECT_DOUBLE_EQ(k.bytes_written, 64.0 * 32 * 4);
  const CaseCost h = case_cost(c, cases::make_case(c, {{"M", 64}, {"N", 32}, {"K", 16}}, DType::bf16));
  EXPECT_DOUBLE_EQ(h.bytes_read, (64.0 * 16 + 16 * 32) * 2);
  // In bf16 every flop is a product of two bf16 inputs or its sum: the dot product's work; none in f32.
  EXPECT_DOUBLE_EQ(k.dot_flops, 0);
  EXPECT_DOUBLE_EQ(h.dot_flops, h.flops);
}

TEST(CaseCost, OnlySumsOfBf16ProductsAreDotFlops) {
  // linear_bias_gelu: the contraction is dot work; the bias and the GELU around it are not.
  const CheckedContract c = contract("linear_bias_gelu");
  const CaseCost k = case_cost(c, cases::make_case(c, {{"N", 8}, {"K", 16}, {"O", 4}}, DType::bf16));
  EXPECT_DOUBLE_EQ(k.dot_flops, 2.0 * 8 * 4 * 16);
  EXPECT_GT(k.flops, k.dot_flops);
  // A sum of a tensor's squares is dot work too (rms_norm's x·x); a sum of computed values is not.
  const CheckedContract rms = contract("rms_norm");
  EXPECT_DOUBLE_EQ(case_cost(rms, cases::make_case(rms, {{"N", 2}, {"D", 3}}, DType::bf16)).dot_flops, 12);
  const CheckedContract sm = contract("softmax");
  EXPECT_DOUBLE_EQ(case_cost(sm, cases::make_case(sm, {{"N", 2}, {"D", 3}}, DType::bf16)).dot_flops, 0);
}

TEST(CaseCost, SoftmaxCountsEveryStatement) {
  // m: 2 rows x 3 max steps; e: 6 x (sub, exp); s: 2 x 3 adds; y: 6 divisions → 6 + 12 + 6 + 6
  const CheckedContract c = contract("softmax");
  const CaseCost k = case_cost(c, cases::make_case(c, {{"N", 2}, {"D", 3}}, DType::f32));
  EXPECT_DOUBLE_EQ(k.flops, 30.0);
  EXPECT_DOUBLE_EQ(k.bytes_read, 24.0);
  EXPECT_DOUBLE_EQ(k.bytes_written, 24.0);
}

TEST(CaseCost, APrefixSumCountsOneTermPerOutput) {
  // cumsum y[n, j] = sum(k in 0..j+1: x[n, k]): carried along j, one addition per output (the contract as
  // written sums 1 + 2 + ... + D terms per row; a kernel need not)
  const CheckedContract c = contract("cumsum");
  const CaseCost k = case_cost(c, cases::make_case(c, {{"N", 3}, {"D", 8}}, DType::f32));
  EXPECT_DOUBLE_EQ(k.flops, 3.0 * 8);
}

TEST(CaseCost, TriangularRangesCountTheirMeanLength) {
  // y[n, j] = sum(k in 0..j+1: x[n, k] * j): the body uses j, so no running sum; per row (1 + 2 + ... + D)
  // multiplications and additions
  std::string yaml = read_file(std::string(CAKE_SOURCE_DIR) + "/bench/ops/cumsum.yaml").value_or("");
  const std::string prefix = "x[n, k])";
  ASSERT_NE(yaml.find(prefix), std::string::npos);
  yaml.replace(yaml.find(prefix), prefix.size(), "x[n, k] * j)");
  const CheckedContract c = check_contract(load_contract_text(yaml));
  const CaseCost k = case_cost(c, cases::make_case(c, {{"N", 3}, {"D", 8}}, DType::f32));
  EXPECT_DOUBLE_EQ(k.flops, 3.0 * (8 * 9 / 2) * 2);
}

TEST(CaseCost, AGatheredTableCountsOnlyTheRowsRead) {
  // embedding y[b, s, d] = w[ids[b, s], d]: 2x3 ids (i64), 6 rows of 4 read from a 1000-row table
  const CheckedContract c = contract("embedding");
  const CaseCost k =
      case_cost(c, cases::make_case(c, {{"B", 2}, {"S", 3}, {"V", 1000}, {"D", 4}}, DType::f32));
  EXPECT_DOUBLE_EQ(k.bytes_read, 2 * 3 * 8 + 2 * 3 * 4 * 4);
  EXPECT_DOUBLE_EQ(k.bytes_written, 2 * 3 * 4 * 4);
}

TEST(Roofline, FloorIsTheSlowerOfComputeAndAllTraffic) {
  const MachinePeaks p{1e11, 1e10};
  EXPECT_DOUBLE_EQ(floor_seconds({1e9, 1e9, 5e8}, p), 0.15);  // reading 1 GB and writing 0.5 at 10 GB/s
  EXPECT_DOUBLE_EQ(floor_seconds({1e11, 1e6, 1e6}, p), 1.0);  // 1e11 flops at 1e11 FLOP/s
  EXPECT_DOUBLE_EQ(floor_seconds({0, 1e6, 2e9}, p), 0.2001);  // writing dominates
}

TEST(Roofline, DotFlopsRunAtTheDotProductPeakWhereThereIsOne) {
  MachinePeaks p{1e11, 1e10};
  CaseCost k{3e11, 1e6, 1e6};
  k.dot_flops = 2e11;
  EXPECT_DOUBLE_EQ(floor_seconds(k, p), 3.0);  // no dot product: every flop at the FMA rate
  p.dot_flops_per_s = 2e11;
  EXPECT_DOUBLE_EQ(floor_seconds(k, p), 2.0);  // 1e11 at 1e11 FLOP/s, 2e11 at 2e11
}

TEST(Roofline, CacheResidentTrafficUsesTheCacheBandwidth) {
  MachinePeaks p{1e11, 1e10};
  p.cache_bytes_per_s = 1e11;
  p.cache_bytes = 1 << 20;
  EXPECT_DOUBLE_EQ(floor_seconds({0, 3e5, 1e5}, p), 4e-6);    // 400 kB at 100 GB/s, not 10
  EXPECT_DOUBLE_EQ(floor_seconds({0, 2e6, 1e6}, p), 3e-4);    // 3 MB is over L2: DRAM
  EXPECT_DOUBLE_EQ(floor_seconds({1e7, 3e5, 1e5}, p), 1e-4);  // compute still bounds
}

// 100 GFLOP/s; 10 GB/s DRAM, 100 GB/s within a 1 MiB L2, 50 GB/s within a 32 MiB LLC.
MachinePeaks tiered_peaks() {
  MachinePeaks p{1e11, 1e10};
  p.cache_bytes_per_s = 1e11;
  p.cache_bytes = 1 << 20;
  p.llc_bytes_per_s = 5e10;
  p.llc_bytes = 32 << 20;
  return p;
}

TEST(Roofline, TrafficOverL2ButWithinTheLlcUsesTheLlcBandwidth) {
  MachinePeaks p = tiered_peaks();
  EXPECT_DOUBLE_EQ(floor_seconds({0, 3e5, 1e5}, p), 4e-6);  // within L2: the L2 bandwidth still
  EXPECT_DOUBLE_EQ(floor_seconds({0, 2e6, 1e6}, p), 6e-5);  // 3 MB at 50 GB/s, not DRAM's 10
  EXPECT_DOUBLE_EQ(floor_seconds({0, 4e7, 2e7}, p), 6e-3);  // 60 MB is over the LLC: DRAM
  p.llc_bytes_per_s = 0;                                    // no LLC figure: DRAM, as before
  EXPECT_DOUBLE_EQ(floor_seconds({0, 2e6, 1e6}, p), 3e-4);
}

TEST(Roofline, RotatedInputsComeFromDramWhileOutputsStayWhereTheyFit) {
  MachinePeaks p = tiered_peaks();
  EXPECT_DOUBLE_EQ(floor_seconds({0, 2e6, 5e5}, p, true), 2e-4 + 5e-6);  // 2 MB from DRAM, 0.5 MB to L2
  EXPECT_DOUBLE_EQ(floor_seconds({0, 2e6, 2e6}, p, true), 2e-4 + 4e-5);  // the 2 MB written stay in LLC
  EXPECT_DOUBLE_EQ(floor_seconds({0, 4e7, 4e7}, p, true), 8e-3);         // both over the LLC: DRAM
  EXPECT_DOUBLE_EQ(floor_seconds({0, 2e6, 2e6}, p, false), 8e-5);        // not rotated: 4 MB in LLC
}

TEST(Roofline, NoFloorIsBelowTheHarnessCallCost) {
  MachinePeaks p{1e11, 1e10};
  p.call_s = 3e-8;
  EXPECT_DOUBLE_EQ(floor_seconds({1, 4, 4}, p), 3e-8);      // one element: the call is the floor
  EXPECT_DOUBLE_EQ(floor_seconds({0, 1e6, 1e6}, p), 2e-4);  // large traffic is unaffected
}

TEST(Roofline, TheCallFloorIsMeasuredAndSmall) {
  const double s = call_floor_seconds();
  EXPECT_GT(s, 0);
  EXPECT_LT(s, 5e-6);  // an empty indirect call with two clock reads; microseconds would mean a bug
  EXPECT_EQ(s, call_floor_seconds());  // measured once per process
}

TEST(Efficiency, IsTheFloorOverTheTimeAndAtMostOne) {
  EXPECT_DOUBLE_EQ(efficiency(1, 4), 0.25);
  EXPECT_DOUBLE_EQ(efficiency(2, 2), 1.0);
  EXPECT_DOUBLE_EQ(efficiency(3, 2), 1.0);  // timed below the floor: the floor was too high
  EXPECT_DOUBLE_EQ(efficiency(1, 0), 0.0);  // no time
}

TEST(Hap, MatchesTheFormulaAndItsEdges) {
  EXPECT_DOUBLE_EQ(hap(2, 3, 1), 2.0 / 3.0);  // (3-1) / ((2-1) + (3-1))
  EXPECT_DOUBLE_EQ(hap(3, 3, 1), 0.5);        // as fast as the baseline
  EXPECT_DOUBLE_EQ(hap(1, 3, 1), 1.0);        // at the floor
  EXPECT_NEAR(hap(1e6, 3, 1), 0.0, 1e-5);     // far slower
  EXPECT_DOUBLE_EQ(hap(0.5, 3, 1), 1.0);      // faster than the floor: the floor drops to 0.5
  EXPECT_DOUBLE_EQ(hap(2, 0.5, 1), 0.0);      // a baseline below the floor and a slower candidate
  EXPECT_DOUBLE_EQ(hap(1, 1, 1), 0.5);        // both at the floor
}

TEST(Score, MatchesCannBenchV02ByHand) {
  // builds; case 1 passes with HAP 2/3, case 2 fails: 100 * (0.2 + (0.3 + 0.5 * 2/3) / 2)
  EXPECT_NEAR(operator_score(true, {{true, 2, 3, 1}, {false, 2, 3, 1}}),
              100 * (0.2 + (0.3 + 0.5 * 2.0 / 3.0) / 2), 1e-9);
  EXPECT_DOUBLE_EQ(operator_score(true, {{true, 1, 3, 1}, {true, 1, 3, 1}}),
                   100.0);  // every case at the floor
  EXPECT_DOUBLE_EQ(operator_score(true, {{true, 3, 3, 1}}),
                   100 * (0.2 + 0.3 + 0.25));  // as fast as the baseline
  EXPECT_DOUBLE_EQ(operator_score(false, {{false, 0, 3, 1}}), 0.0);
  EXPECT_DOUBLE_EQ(operator_score(true, {}), 20.0);
}

TEST(Score, LevelSummaryAveragesScoresAndPoolsCases) {
  const auto rows = summarize_levels({{1, 80, 20, 20}, {1, 60, 20, 10}, {3, 30, 20, 5}});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].level, 1);
  EXPECT_DOUBLE_EQ(rows[0].mean_score, 70);
  EXPECT_DOUBLE_EQ(rows[0].pass_rate, 30.0 / 40);
  EXPECT_EQ(rows[1].level, 3);
  EXPECT_EQ(rows[2].level, 0);  // all levels
  EXPECT_EQ(rows[2].operators, 3);
  EXPECT_DOUBLE_EQ(rows[2].mean_score, 170.0 / 3);
  EXPECT_DOUBLE_EQ(rows[2].pass_rate, 35.0 / 60);
}

}  // namespace
}  // namespace cake::eval
