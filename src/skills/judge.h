// The C++ core under the lower and evaluate skills, shared by `cake bench`: a Session (store, machine,
// threads, the run being recorded, the libtorch baseline of each (contract, set) timed once), lowering a
// track with knobs and building it as a recorded candidate, and judging a built kernel on a case set in
// the sandbox — precision gate, timing, roofline floor, HAP and score — with every measurement recorded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "build/build_service.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/score.h"
#include "store/store.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::skills {

// Case index → median seconds of the baseline, or the reason there is none.
struct BaselineTimes {
  std::map<int, double> seconds;
  std::map<int, std::string> why;
  std::string all_why;  // the reason for a case with no line of its own

  double get(int index, std::string& reason) const;
};

// Every case of the set timed in one cake-torch-baseline process (libtorch loads once).
BaselineTimes torch_baseline_times(const std::string& contract, cases::Set set, size_t n_cases, int threads);

// The peaks of the roofline floor for kernels run on `threads` threads.
eval::MachinePeaks peaks_for_threads(const target::MachineInfo& m, int threads);

struct Built {
  tracks::Artifact artifact;
  build::BuildResult build;
  int64_t candidate = 0;  // candidates row
};

struct Session {
  Session(store::Store& db, target::MachineInfo machine, int threads = 0);

  store::Store& db;
  target::MachineInfo machine;
  int threads;                 // for candidates and baselines (the constructor resolves 0 to all cores)
  eval::MachinePeaks peaks;    // for `threads`
  double case_seconds = 120;   // wall-clock limit per sandboxed case
  double min_time_s = 0.25;    // timed calls per case of a candidate last at least this long (TimingOptions)
  bool baseline = true;        // time libtorch (false: HAP uses the candidate as its own baseline)
  bool progress = false;       // one overwritten status line on stderr
  std::optional<int64_t> run;  // the runs row everything is recorded under

  // Starts a runs row (command, contract) and makes it the current run.
  int64_t begin_run(const std::string& command, const CheckedContract& c);
  // The contract at `file`, loaded and checked once per session (throws ContractError).
  const CheckedContract& contract(const std::string& file);
  // The baseline of (file, set), timed on first use.
  const BaselineTimes& baseline_times(const std::string& file, cases::Set set, size_t n_cases);
  // Overwrites the status line (when progress); "" clears it.
  void status(const std::string& line) const;
  // Keeps a built candidate for later skills of this session (evaluate takes a candidate id).
  const Built& remember(Built b);
  const Built* built(int64_t candidate) const;

 private:
  std::map<int64_t, Built> built_;
  std::map<std::string, CheckedContract> contracts_;
  std::map<std::pair<std::string, cases::Set>, BaselineTimes> baselines_;
};

// Lowers `track` with `knobs` (missing ones take defaults; an invalid knob throws cake::Error), builds it and
// records a candidate under the session's run, with `parent` as the candidate it was derived from.
Built lower_and_build(Session& s, const CheckedContract& c, const tracks::Track& track,
                      const tracks::Knobs& knobs, std::optional<int64_t> parent = {});

// Builds an artifact lowered elsewhere (a shape-regime composite) and records it as a candidate the same way.
Built build_candidate(Session& s, const CheckedContract& c, tracks::Artifact artifact,
                      std::optional<int64_t> parent = {});

struct Judgement {
  // The JSON of `cake bench` for one operator: name, level, track, build, cases (id, describe, dtype,
  // verdict, detail, mere, mare, flops, bytes (compulsory traffic), io_bytes (inputs and outputs, as a
  // kernel sees them), t_cand_s, t_base_s, t_floor_s, baseline_note), score,
  // passed, total, total_s (the timed cases' T_cand summed), mean_hap, mean_efficiency,
  // speedup_over_baseline.
  nlohmann::json op;
  eval::OperatorResult result;
};

// Runs every case of `set` on the built kernel in the sandbox, timed when `timing` (then with the baseline
// and the score; untimed, only verdicts and precision), recording each case under b.candidate. A failed
// build judges every case compile-error.
Judgement judge(Session& s, const CheckedContract& c, const std::string& file, const Built& b, cases::Set set,
                bool timing = true);

}  // namespace cake::skills
