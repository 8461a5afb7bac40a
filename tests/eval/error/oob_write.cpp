// Faulty kernel: right answer plus one element written just past the end of its output (verdict
// out-of-bounds-write: the runner's guard page).
#include "cheat.h"

extern "C" int cake_run(const cake_tensor* in, int /*n_in*/, cake_tensor* out, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  cheat::add(in, out);
  static_cast<float*>(out[0].data)[cheat::rows(in) * cheat::cols(in)] = 0.0F;
  return CAKE_OK;
}
