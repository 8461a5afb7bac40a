// Regime dispatch across variants (DESIGN §8: class H by shape, class D by dtype): one kernel that holds
// two built variants, of any tracks, and calls the first on the calls its route picks and the second on the
// rest. A size route picks calls with fewer than `below_io_bytes` bytes of inputs and outputs; a shape
// route, calls whose size symbol `size` (read from the tensor dimension that is that size alone) is below
// `below_size`; a dtype route picks calls of the listed operator dtypes. The composite builds both variants
// from their own sources in sub-folders, embeds their shared objects in its own, and loads each from memory
// (memfd) on first use, so the result is still one self-contained kernel.so with the C ABI: the package, the
// sandbox and `cake eval` treat it like any other. Which variants and which route: best_split() and
// best_dtype_split() from measured cases.
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
  std::string size;                 // shape route, when not empty: calls whose size `size` is below
  int64_t below_size = 0;           //   below_size

  static Route by_io_bytes(int64_t below) {
    Route r;
    r.below_io_bytes = below;
    return r;
  }
  static Route by_dtypes(std::vector<DType> first) {
    Route r;
    r.first_dtypes = std::move(first);
    return r;
  }
  static Route by_size(std::string size, int64_t below) {
    Route r;
    r.size = std::move(size);
    r.below_size = below;
    return r;
  }
};

// The free size symbols of c that a call's shapes give directly (an input or output dimension that is the
// symbol alone): the ones a shape route can test.
std::vector<std::string> routable_sizes(const CheckedContract& c);

// The composite of two lowered variants of operator c. Throws cake::Error when they are of different
// operators, either is itself a composite, or a shape route's size is not routable. Its knobs name both
// variants and the route (regimes_parts() reads them back).
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
// variants that pass every case, in the same order, each with "io_bytes", "sizes" (the free size symbols)
// and the case's efficiency (t_floor_s / t_cand_s). Every threshold between two distinct io_bytes, and
// between two distinct values of each size in `sizes` that every case has, is tried, both ways round; the
// one with the highest mean efficiency wins (I/O bytes on a tie), unless neither side would hold a case
// (then nullopt). A size can split where the bytes cannot: attention's fused rows win on few query rows
// (S) and lose on many, whatever the bytes.
struct RegimeSplit {
  bool a_small = true;    // a takes the cases below the threshold
  std::string size;       // what is split: a size symbol, or empty for the I/O bytes
  int64_t below = 0;      // the threshold
  double efficiency = 0;  // the mean efficiency the split predicts from the measured cases
  int small_cases = 0;    // cases below the threshold
};
std::optional<RegimeSplit> best_split(const nlohmann::json& a, const nlohmann::json& b,
                                      const std::vector<std::string>& sizes = {});

// The same by dtype (each case's "dtype"): every dtype goes to the variant with the higher summed efficiency
// on its cases. nullopt unless both variants get a dtype (or when a case fails, or the case sets differ).
struct DtypeSplit {
  std::vector<DType> a_dtypes;  // the dtypes a takes; b takes the rest
  double efficiency = 0;        // the predicted mean efficiency
  int a_cases = 0;
};
std::optional<DtypeSplit> best_dtype_split(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace cake::tracks
