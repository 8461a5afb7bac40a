// Evolution mode (DESIGN §8): rounds of variants from the best correct kernels. Each round samples parents
// from the tiers Good / Medium / Poor (60 / 30 / 10), its first parent a track's champion (the tracks within
// half the leader's efficiency take turns by round, so a close second track is explored; parents.h), reads
// each parent's bottleneck signature, assigns a strategy class by signature and asks the optimize skill for a
// one-knob move of that class (not one that already failed in the run); the round's variants are planned
// (written to the store) before any is built, then each is lowered and judged with timing in one transaction
// with its result. The best-so-far is the variant with the highest mean roofline efficiency over the cases
// that passes every case, so a regression never loses it. Stop at efficiency >= 0.95, at no gain above 0.1%
// in 5 rounds, when no move is left, or at the round budget. Every variant was timed once, and the best of
// many single timings is also the luckiest (the winner's curse): at the stop, the best and the seed are timed
// again, alternately (EvolveOptions::confirm), and the best is delivered only if its median beats the seed's.
// A killed run resumes (resume()) with nothing lost or measured twice.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "skills/judge.h"

namespace cake::evolve {

struct EvolveOptions {
  int rounds = 20;   // round budget (round 0, the seed, not counted)
  int variants = 4;  // per round
  double stop_efficiency = 0.95;
  int patience = 5;  // rounds without a gain above min_gain before stopping
  double min_gain = 0.001;
  // A shape-regime composite of two variants is planned (one per round, besides the knob moves) when its
  // split predicts a mean efficiency this much (relative) above the fittest single variant's.
  double composite_gain = 0.02;
  // A track's champion takes its turn as a round's first parent while its efficiency is at least this
  // share of the leader's (track_champions in parents.h); 0: every track with a correct variant does.
  double champion_share = 0.5;
  // At the stop, the best and the seed are each timed this many more times, alternately; the one with the
  // higher median mean efficiency is delivered (the seed on a tie). 0: the best as its round measured it.
  int confirm = 3;
  uint64_t seed = 1;  // of the parent and move sampling (the plan of a round is deterministic)
  // More round-0 seeds besides the starting kernel: other correct kernels (other tracks) generation found,
  // as (track, knobs). Their variants compete in the same tiers, so the search can cross tracks.
  std::vector<std::pair<std::string, nlohmann::json>> more_seeds;
  std::function<void(const std::string&)> log;  // one line per variant and per round
};

struct RoundSummary {
  int round = 0;
  double best_s = 0;      // total time over the cases of the best-so-far
  double efficiency = 0;  // its mean roofline efficiency
  int good = 0, medium = 0, poor = 0;
  std::string signature;  // the bottleneck of the round's parents (most frequent)
  std::vector<std::string> strategies;
};

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit moves of nlohmann::json members
struct EvolveResult {
  bool ok = false;
  std::string why;  // when !ok
  int64_t run = 0;
  std::vector<RoundSummary> rounds;
  std::string stop_reason;
  std::string track;
  nlohmann::json knobs;  // of the kernel delivered: the best-so-far, unless the confirmation chose the seed
  nlohmann::json evaluation;  // the evaluate skill's timed output for it (the confirmation's median, if any)
  std::string library;        // its shared object
  int measured_now = 0;       // variants this call measured
  // The starting kernel's output as this run measured it (null if it failed): the "before" that compares
  // with `evaluation` in one run, on the same machine state, not with generation's earlier timing; the
  // confirmation's median where there is one, else round 0's timing.
  nlohmann::json seed_evaluation;
  // {"repeats", "seed", "best" (each's mean efficiencies in the order timed), "seed_median", "best_median"
  // (the mean efficiency of each's median_evaluation; null where a repeat failed), "delivered": "best" |
  // "seed"}; null where nothing was confirmed (confirm = 0, the seed was the best, or the seed failed).
  nlohmann::json confirmation;
};

// Starts Evolution under a new run (Session::begin_run "evolve") from a correct kernel (track, knobs).
EvolveResult evolve(skills::Session& s, const std::string& file, const std::string& track,
                    const nlohmann::json& knobs, const EvolveOptions& o = {});

// The latest evolve run of this contract that has not stopped, if any.
std::optional<int64_t> unfinished_run(store::Store& db, const std::string& contract_hash);

// The delivered variant of this contract's latest finished evolve run (the one a stop reason closed): its
// best, or its seed where the confirmation chose the seed.
struct Evolved {
  int64_t run = 0;
  std::string track;  // a track's name, or tracks::kRegimesTrack for a shape-regime composite
  nlohmann::json knobs;
  double efficiency = 0;  // its mean roofline efficiency as the run measured it (confirmed, if it was)
};
std::optional<Evolved> latest_evolved(store::Store& db, const std::string& contract_hash);

// The stop's re-timing (EvolveOptions::confirm): of one side's repeated evaluations, the one of median mean
// efficiency (the lower middle of an even count); null when a repeat did not pass every case.
nlohmann::json median_evaluation(const std::vector<nlohmann::json>& repeats);
// Whether the stop delivers the best rather than the seed, given each side's median_evaluation: only if the
// best's mean efficiency beats the seed's (a tie keeps the seed); never when the best's re-timing failed,
// always when only the seed's did.
bool delivers_best(const nlohmann::json& seed_median, const nlohmann::json& best_median);

// A variant's artifact, ready to build: its track's lowering, or for a composite both parts' lowerings.
tracks::Artifact variant_artifact(skills::Session& s, const CheckedContract& c, const std::string& track,
                                  const nlohmann::json& knobs);

// Continues run `run` (planned variants first, then the remaining rounds) under the same run id.
EvolveResult resume(skills::Session& s, const std::string& file, int64_t run, const EvolveOptions& o = {});

// The evolution curve for the package report: [{round, best_s, efficiency}].
nlohmann::json curve(const EvolveResult& r);

}  // namespace cake::evolve
