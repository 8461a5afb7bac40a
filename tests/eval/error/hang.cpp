// Faulty kernel: never returns (verdict timeout). The spin reads a volatile, so the loop is not undefined.
#include "cheat.h"

extern "C" int cake_run(const cake_tensor* /*in*/, int /*n_in*/, cake_tensor* /*out*/, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  volatile int spin = 1;
  while (spin != 0) {
  }
  return CAKE_OK;
}
