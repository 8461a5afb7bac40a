// The `simd` track: C++ compiled with g++ -O3 -march=native and OpenMP (loop-nest lowering with row
// fusion, vectorizable f32 math; see loop_nest.h).
#pragma once

#include "tracks/track.h"

namespace cake::tracks {
const Track& simd_track();
}  // namespace cake::tracks
