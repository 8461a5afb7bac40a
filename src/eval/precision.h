// The CAKE-Bench precision gate (DESIGN §6, CANN-Bench's): per element relative error
// e = |a - g| / (|g| + 1e-7); MERE = mean e, MARE = max e; pass when MERE < T and MARE < 10 T,
// T = 2^-13 (f32), 2^-10 (f16), 2^-7 (bf16). Integers and bool match exactly; NaN positions
// match; where |g| < T the element is judged on absolute error |a - g| instead.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace cake::eval {

double precision_threshold(DType t);

struct GateResult {
  bool pass = false;
  double mere = 0, mare = 0;
  int64_t worst = -1;         // flat index of the worst element (-1: none)
  double worst_got = 0, worst_want = 0;
  int64_t mismatches = 0;     // elements over 10 T (or unequal, for integers), NaN mismatches
  std::string reason;         // empty on pass; "shape", "nan-position", "mare", "mere", "exact"
  std::string str() const;
};

GateResult precision_gate(const Tensor& got, const Tensor& want);

}  // namespace cake::eval
