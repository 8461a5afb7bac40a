// The track registry: every code-generation track CAKE knows, in the order the router lists them.
#include <array>

#include "tracks/simd/simd_track.h"
#include "tracks/track.h"
#ifdef CAKE_HAVE_TRACK_halide
#include "tracks/halide/halide_track.h"
#endif
#ifdef CAKE_HAVE_TRACK_opencl
#include "tracks/opencl/opencl_track.h"
#endif

namespace cake::tracks {

namespace {
const std::vector<const Track*>& registry() {
  static const std::vector<const Track*> tracks = {
#ifdef CAKE_HAVE_TRACK_halide
      &halide_track(),
#endif
      &simd_track(),
#ifdef CAKE_HAVE_TRACK_opencl
      &opencl_track(),
#endif
  };
  return tracks;
}
}  // namespace

std::span<const Track* const> all_tracks() {
  return registry();
}

const Track* find_track(std::string_view name) {
  for (const Track* t : registry())
    if (t->name() == name) return t;
  return nullptr;
}

}  // namespace cake::tracks
