// Cheat kernel: right answer, but it uses its input x as scratch afterwards (verdict input-mutated).
#include "cheat.h"

extern "C" int cake_run(const cake_tensor* in, int /*n_in*/, cake_tensor* out, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  cheat::add(in, out);
  static_cast<float*>(in[0].data)[0] += 1.0F;
  return CAKE_OK;
}
