// Strategy classes of Evolution mode (DESIGN §8) as moves in the tracks' knob spaces, and which classes a
// bottleneck signature calls for, most promising first. A class is a set of knob names across tracks; the
// optimize skill moves one of them at a time within the track's space.
//   P performance: tiles, vector width, unrolling, reduction lanes, transposed copies, work-group shapes
//   F fusion: how intermediate stages are kept (inline, per row, at root), loop fusion
//   A accuracy / fast math: accumulator and arithmetic types (a faster type must still pass the gate)
//   H host level: parallelism, task sizes, thread counts, serial thresholds
//   D multi-dtype: a dtype's own instructions (bf16 contractions on the bf16 dot product)
// Dtype and shape-regime composites of two variants are planned by the loop itself (regimes track).
#pragma once

#include <string>
#include <vector>

#include "evolve/signature.h"

namespace cake::evolve {

// The knob names of class 'P', 'F', 'A', 'H' or 'D' (empty for any other letter).
const std::vector<std::string>& class_knobs(char cls);

// The classes to try for a signature, most promising first.
std::vector<char> classes_for(Bottleneck b);

}  // namespace cake::evolve
