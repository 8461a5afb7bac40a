// CAKE-Bench's roofline floor and score (DESIGN §6): the case's flops and compulsory traffic from the TE,
// T_HW = max(T_call, F / P_flops, (Q_read + Q_write) / BW) with BW that of L2, LLC or DRAM by footprint,
// efficiency = T_HW / T_cand, HAP per case and the CANN-Bench V0.2 operator score, and the per-level
// summary of the paper's Figure 7.
#pragma once

#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"

namespace cake::eval {

// Floating-point work and compulsory traffic of one case. Flops count every float arithmetic operation,
// comparison and function call of the TE as one (a transcendental function is one flop, as rooflines
// usually count it); integer index arithmetic is not counted. Reductions multiply their body by their
// extent; a range whose bounds depend on outer variables (cumsum's k in 0..j+1) is counted at the
// midpoint of those variables (exact for affine bounds). Traffic: every input read once, every output
// written once, in the case's dtypes; an input read only through data-dependent indices (a gathered
// table) counts at most one element per point of the statements that read it.
// dot_flops, part of flops: the sums of products of two bf16 tensors (a bf16 case's matmul), which a CPU
// with a bf16 dot-product instruction runs at that instruction's rate.
struct CaseCost {
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  double dot_flops = 0;
};
CaseCost case_cost(const CheckedContract& c, const cases::Case& k);

struct MachinePeaks {
  double flops_per_s = 0;  // the doctor's FP32 FMA peak at the thread count the kernels run with
  double bytes_per_s = 0;  // the doctor's triad (DRAM) bandwidth at that thread count
  // Cases whose whole traffic fits in one core's L2 (cache_bytes) are timed on the same buffers again and
  // again, so they stream from cache: the doctor's cache-resident triad at the thread count. 0: unknown.
  double cache_bytes_per_s = 0;
  double cache_bytes = 0;
  // Cases too big for L2 whose traffic fits the last-level cache (llc_bytes) stream from it: the doctor's
  // LLC-resident triad at the thread count. 0: unknown (such cases take the DRAM bandwidth).
  double llc_bytes_per_s = 0;
  double llc_bytes = 0;
  double call_s = 0;           // the harness's own cost of timing one call of a kernel that does nothing
  double dot_flops_per_s = 0;  // the BF16 dot-product peak there (0: none; dot flops take flops_per_s)
};

// T_HW in seconds: max(call_s, F / flops_per_s, Q_read / BW_read + Q_write / BW_write), the bf16 dot
// flops of F at dot_flops_per_s where the machine has one. Reads and writes
// share one memory bus on a CPU, and the triad bandwidth counts them together (STREAM), so their times
// add. Each BW is that of the smallest level (L2, LLC, DRAM) its buffers stay in while the harness repeats
// the call: the whole traffic's level when the same inputs are used every call; when the inputs rotate over
// sets larger than the LLC (`inputs_rotated`), DRAM for the reads and the outputs' own level for the writes
// (every call writes the same output buffers). So the floor stays below any time a kernel can reach.
double floor_seconds(const CaseCost& cost, const MachinePeaks& peaks, bool inputs_rotated = false);

// HAP = (T_base − T_HW) / ((T_cand − T_HW) + (T_base − T_HW)): 0.5 as fast as the baseline, 1 at the floor.
// A measured time below the floor means the floor is too high (peaks measured low); the floor is then
// lowered to the fastest of the two times, and when both sit at it HAP is 0.5. Result in [0, 1].
double hap(double t_cand, double t_base, double t_hw);

// Efficiency = T_HW / T_cand, at most 1: a time below the floor means the floor is too high (as for HAP), so
// the case is at the floor, and the mean over cases is not lifted by a miss of the model.
double efficiency(double t_hw, double t_cand);

struct CaseResult {
  bool passed = false;  // δ_acc: the case passes the precision gate
  double t_cand = 0, t_base = 0, t_hw = 0;
};

// Score = 100 · [0.2 · δ_pass + Σ_i δ_acc,i · (0.3 + 0.5 · HAP_i) / N]; δ_pass: the kernel builds and runs.
double operator_score(bool builds_and_runs, const std::vector<CaseResult>& cases);

struct OperatorResult {
  int level = 0;
  double score = 0;
  int cases = 0, passed = 0;
};
struct LevelSummary {
  int level = 0;
  int operators = 0;
  double mean_score = 0;
  int cases = 0, passed = 0;
  double pass_rate = 0;  // passed / cases
};
// One row per level present, ascending, then level 0 = all levels together.
std::vector<LevelSummary> summarize_levels(const std::vector<OperatorResult>& ops);

}  // namespace cake::eval
