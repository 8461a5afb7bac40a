// Faulty kernel: asks for 30 GiB of scratch; returns CAKE_ERR_NOMEM when malloc says no, else touches it
// (verdict out-of-memory either way: the status, or the memory limit / OOM killer).
#include <cstdlib>
#include <cstring>

#include "cheat.h"

extern "C" int cake_run(const cake_tensor* in, int /*n_in*/, cake_tensor* out, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  const size_t bytes = size_t{30} << 30;
  void* p = std::malloc(bytes);  // NOLINT(cppcoreguidelines-no-malloc): the fault under test
  if (p == nullptr) return CAKE_ERR_NOMEM;
  std::memset(p, 1, bytes);
  std::free(p);  // NOLINT(cppcoreguidelines-no-malloc)
  cheat::add(in, out);
  return CAKE_OK;
}
