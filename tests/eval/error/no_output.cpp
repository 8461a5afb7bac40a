// Cheat kernel: returns success without writing its output (verdict no-output).
#include "cheat.h"

extern "C" int cake_run(const cake_tensor* /*in*/, int /*n_in*/, cake_tensor* /*out*/, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  return CAKE_OK;
}
