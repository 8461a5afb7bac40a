// One operator judged the way `cake bench` judges it, shared by `cake bench` and `cake deliver`: the
// libtorch baseline of the operator's whole case set (one process), and one track's default-knob kernel
// lowered, built, run on every case in the sandbox, timed and scored, with every measurement in the store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/score.h"
#include "store/store.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::cli {

// Case index → median seconds of the baseline, or the reason there is none.
struct BaselineTimes {
  std::map<int, double> seconds;
  std::map<int, std::string> why;
  std::string all_why;  // the reason for a case with no line of its own

  double get(int index, std::string& reason) const;
};

BaselineTimes torch_baseline_times(const std::string& contract, cases::Set set, size_t n_cases, int threads);

struct BenchContext {
  cases::Set set;
  int threads;
  double case_seconds;
  bool tty;  // progress on stderr
  eval::MachinePeaks peaks;
  store::Store& db;
};

// What one track did on one operator. op: the JSON of `cake bench` (name, level, track, build, cases with
// id, describe, dtype, verdict, detail, mere, mare, t_cand_s, t_base_s, t_floor_s, flops, bytes; score,
// passed, total, mean_hap, mean_efficiency, speedup_over_baseline; or infeasible).
struct TrackRun {
  nlohmann::json op;
  eval::OperatorResult result;
  bool feasible = false;
  bool built = false;
  std::filesystem::path library;  // the built kernel, when built
  nlohmann::json knobs;
};

// Lowers, builds and judges one track on one operator under an existing run row. `baseline` is called
// (with the case count) once a kernel has built; it should cache its answer.
TrackRun bench_track(BenchContext& ctx, const CheckedContract& c, const std::string& file,
                     const tracks::Track& track, const target::MachineInfo& m, int64_t run_id,
                     const std::function<const BaselineTimes&(size_t)>& baseline);

// The peaks of the roofline floor for kernels run on `threads` threads.
eval::MachinePeaks peaks_for_threads(const target::MachineInfo& m, int threads);

}  // namespace cake::cli
