// Vectorizable f32 math for the Halide track: Halide 14 has no erf, and its exp / tanh call scalar libm.
// One set of coefficients (fitted for CAKE by Chebyshev interpolation in long double) drives both the
// Halide helper functions written into every generated pipeline.cpp and plain C++ float versions with the
// same operation order, which the unit tests compare against libm.
#pragma once

#include <string>

namespace cake::tracks::halide {

// Plain float evaluations, operation for operation what the generated Halide code computes.
float exp_f32(float x);   // ~2 ulp; 0 below -87.33, inf above 88.72
float erf_f32(float x);   // relative error ~2e-7
float erfc_f32(float x);  // relative error ~4e-7 (also for large x, where 1 - erf cancels)
float tanh_f32(float x);  // relative error ~2e-7

// C++ source defining, for a Halide generator, `static Halide::Expr cake_exp(Expr)`, cake_erf, cake_erfc,
// cake_tanh, cake_sigmoid, the bf16 <-> f32 conversions (round to nearest even) and the NaN-aware max/min.
std::string halide_math_source();

}  // namespace cake::tracks::halide
