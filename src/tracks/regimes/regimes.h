// Shape-regime dispatch across variants (DESIGN §8, class H): one kernel that holds two built variants,
// of any tracks, and calls the first on cases with fewer than `below_io_bytes` bytes of inputs and outputs
// and the second on the rest. The composite builds both variants from their own sources in sub-folders,
// embeds their shared objects in its own, and loads each from memory (memfd) on first use, so the result is
// still one self-contained kernel.so with the C ABI: the package, the sandbox and `cake eval` treat it like
// any other. Which variants and which threshold: best_split() from measured cases.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "tracks/track.h"

namespace cake::tracks {

inline constexpr const char* kRegimesTrack = "regimes";

// The composite of two lowered variants of one operator. Throws cake::Error when they are of different
// operators or either is itself a composite. Its knobs name both variants (regimes_parts() reads them back).
Artifact compose_regimes(const Artifact& small, const Artifact& large, int64_t below_io_bytes);

// What a composite's knobs say: each variant's track and knobs, and the threshold.
struct RegimesParts {
  std::string small_track, large_track;
  nlohmann::json small_knobs, large_knobs;
  int64_t below_io_bytes = 0;
};
RegimesParts regimes_parts(const Knobs& composite);  // throws cake::Error on knobs of anything else

// Where to split the cases between two variants. `a` and `b` are the evaluate skill's "cases" of two
// variants that pass every case, in the same order, each with "io_bytes" and the case's efficiency
// (t_floor_s / t_cand_s). Every threshold between two distinct io_bytes is tried, both ways round; the one
// with the highest mean efficiency wins, unless neither side would hold a case (then nullopt).
struct RegimeSplit {
  bool a_small = true;         // a takes the cases below the threshold
  int64_t below_io_bytes = 0;  // the threshold
  double efficiency = 0;       // the mean efficiency the split predicts from the measured cases
  int small_cases = 0;         // cases below the threshold
};
std::optional<RegimeSplit> best_split(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace cake::tracks
