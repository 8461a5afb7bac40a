// Faulty kernel: writes through a null pointer (verdict crash, SIGSEGV). The pointer is read from a volatile
// so that the compiler cannot turn the store into a trap instruction.
#include "cheat.h"

extern "C" int cake_run(const cake_tensor* /*in*/, int /*n_in*/, cake_tensor* /*out*/, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  float* volatile p = nullptr;
  *p = 1.0F;
  return CAKE_OK;
}
