// Shared by the cheat kernels of the sandbox test: the add contract's (z[m, n] = x[m, n] + y[n]) shapes
// read from the ABI tensors, and the right answer, so each cheat differs from a correct kernel in one way.
#pragma once

#include <cstdint>

#include "core/kernel_abi.h"

namespace cheat {

inline int64_t rows(const cake_tensor* in) {
  return in[0].shape[0];
}
inline int64_t cols(const cake_tensor* in) {
  return in[0].shape[1];
}

// z = x + y (f32, y broadcast over the rows of x).
inline void add(const cake_tensor* in, cake_tensor* out) {
  const auto* x = static_cast<const float*>(in[0].data);
  const auto* y = static_cast<const float*>(in[1].data);
  auto* z = static_cast<float*>(out[0].data);
  const int64_t m = rows(in), n = cols(in);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) z[i * n + j] = x[i * n + j] + y[j];
}

}  // namespace cheat
