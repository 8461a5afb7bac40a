// Cheat kernel: computes the first input it sees, keeps that answer in a static and returns it for every
// later call (verdict stale-result: right on the case's inputs, wrong on the re-verification inputs).
#include <cstring>
#include <vector>

#include "cheat.h"

extern "C" int cake_run(const cake_tensor* in, int /*n_in*/, cake_tensor* out, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  static std::vector<float> first;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables): the cheat
  const auto n = static_cast<size_t>(cheat::rows(in) * cheat::cols(in));
  if (first.empty()) {
    cheat::add(in, out);
    first.assign(static_cast<const float*>(out[0].data), static_cast<const float*>(out[0].data) + n);
  } else {
    std::memcpy(out[0].data, first.data(), n * sizeof(float));
  }
  return CAKE_OK;
}
