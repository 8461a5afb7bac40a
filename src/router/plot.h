// The fitted abilities as a picture (DESIGN §7): one group of bars per parameter (the track level a,
// the eight feature weights θ, the difficulty weight b), one bar per track, with ±1 standard deviation
// from the Laplace covariance. Plain SVG, no dependency.
#pragma once

#include <string>

#include "router/ability_model.h"

namespace cake::router {

std::string abilities_svg(const Model& m);

}  // namespace cake::router
