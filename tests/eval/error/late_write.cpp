// Cheat kernel: returns at once and leaves a detached thread that writes the (right) output 10 ms later
// (verdict late-write).
#include <chrono>
#include <thread>

#include "cheat.h"

extern "C" int cake_run(const cake_tensor* in, int /*n_in*/, cake_tensor* out, int /*n_out*/,
                        const double* /*params*/, int /*n_params*/) {
  const cake_tensor a = in[0], b = in[1];
  cake_tensor z = out[0];
  std::thread([a, b, z]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const cake_tensor ins[2] = {a, b};
    cheat::add(ins, &z);
  }).detach();
  return CAKE_OK;
}
