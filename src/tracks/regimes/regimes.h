// Regime dispatch across variants (DESIGN §8: class H by shape, class D by dtype): one kernel that holds
// two built variants, of any tracks, and calls the first on the calls its route picks and the second on the
// rest. A size route picks calls with fewer than `below_io_bytes` bytes of inputs and outputs; a dtype
// route picks calls of the listed operator dtypes. The composite builds both variants from their own sources
// in sub-folders, embeds their shared objects in its own, and loads each from memory (memfd) on first use,
// so the result is still one self-contained kernel.so with the C ABI: the package, the sandbox and
// `cake eval` treat it like any other. Which variants and which route: best_split() and best_dtype_split()
// from measured cases.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "tracks/track.h"

namespace cake::tracks {

inline constexpr const char* kRegimesTrack = "regimes";

// Which calls go to a composite's first variant ("small"); the others go to the second ("large").
struct Route {
  int64_t below_io_bytes = 0;       // size route: calls with fewer bytes of inputs and outputs
  std::vector<DType> first_dtypes;  // dtype route, when not empty: calls of these operator dtypes
};

// The composite of two lowered variants of operator c. Throws cake::Error when they are of different
// operators or either is itself a composite. Its knobs name both variants and the route (regimes_parts()
// reads them back).
Artifact compose_regimes(const CheckedContract& c, const Artifact& small, const Artifact& large,
                         const Route& r);

// What a composite's knobs say: each variant's track and knobs, and the route.
struct RegimesParts {
  std::string small_track, large_track;
  nlohmann::json small_knobs, large_knobs;
  Route route;
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

// The same by dtype (each case's "dtype"): every dtype goes to the variant with the higher summed efficiency
// on its cases. nullopt unless both variants get a dtype (or when a case fails, or the case sets differ).
struct DtypeSplit {
  std::vector<DType> a_dtypes;  // the dtypes a takes; b takes the rest
  double efficiency = 0;        // the predicted mean efficiency
  int a_cases = 0;
};
std::optional<DtypeSplit> best_dtype_split(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace cake::tracks
