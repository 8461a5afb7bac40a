// Parent selection for Evolution mode (DESIGN §8): a run's variants as stored, their fitness, the tiers
// Good / Medium / Poor, the tier sampler, the track champions that take turns as a round's first parent, and
// the moves a run has seen fail. Pure functions of the variants, so they are tested without timing anything
// (tests/evolve/parents_test.cpp); loop.cpp reads the variants from the store and plans rounds with them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace cake::evolve {

// One variant of an evolve run, as the store holds it.
struct Variant {
  int64_t id = 0;
  int round = 0;
  std::string track, knobs_key;  // knobs_key: the resolved knobs as stored (unique per run)
  std::string source_hash;       // of the lowered artifact: two knob sets with one source are one variant
  int64_t parent = 0;
  std::string strategy, status;  // planned | measured (every case passes) | failed
  double total_s = 0, efficiency = 0;
  nlohmann::json result;  // the evaluate skill's output (or {"error": ...})
  bool correct() const { return status == "measured"; }
};

// A composite (the regimes track) of two variants: its moves are new splits, not knob moves.
bool is_composite(const std::string& track);

// The fitness order: the higher mean roofline efficiency over the cases (every case counts alike, as in the
// score and the stop test), then the shorter total time.
bool fitter(const Variant& a, const Variant& b);

// The fittest correct variant of rounds up to `up_to_round`; null when none is correct.
const Variant* best_of(const std::vector<Variant>& all, int up_to_round);

struct Tiers {
  std::vector<const Variant*> good, medium, poor;  // correct variants, fittest first
  std::vector<const Variant*> failed;              // counted as Poor, never parents
};

// Correct variants by fitness in thirds (Good, Medium, the rest Poor); failed ones apart.
Tiers tier(const std::vector<Variant>& all);

// A parent from the tiers, 60 / 30 / 10 (an empty tier passes its share on); null when no variant is
// correct.
const Variant* sample_parent(const Tiers& t, std::mt19937_64& rng);

// The fittest correct variant of each track whose efficiency is at least `min_share` of the leader's,
// fittest first: the tracks that take turns as a round's first parent.
std::vector<const Variant*> track_champions(const std::vector<Variant>& singles, double min_share = 0.5);

// The moves ("track|move", as the optimize skill names them) whose variant failed in the run.
std::set<std::string> failed_moves(const std::vector<Variant>& all);

}  // namespace cake::evolve
