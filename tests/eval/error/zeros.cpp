// Cheat kernel: writes zeros instead of the sum (verdict wrong-result).
#include <cstring>

#include "cheat.h"

extern "C" int cake_run(const cake_tensor* in, int /*n_in*/, cake_tensor* out, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  std::memset(out[0].data, 0, static_cast<size_t>(cheat::rows(in) * cheat::cols(in)) * sizeof(float));
  return CAKE_OK;
}
