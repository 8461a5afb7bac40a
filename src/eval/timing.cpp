// The harness's repetition loop and its statistics.
#include "eval/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "core/kernel_abi.h"

namespace cake::eval {

size_t input_sets(double flops, double bytes, double input_bytes) {
  constexpr double kMiB = 1 << 20;
  const bool memory_bound = bytes > 0 && flops / bytes < 4.0;
  if (!memory_bound || input_bytes < kMiB) return 1;
  return static_cast<size_t>(std::ceil(64 * kMiB / input_bytes)) + 1;
}

uint64_t input_set_seed(uint64_t seed, size_t i) {
  uint64_t x = seed + 0x1000 + i + 0x9e3779b97f4a7c15ull;  // splitmix64
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

nlohmann::json Timing::to_json() const {
  return {{"median_s", median_s}, {"min_s", min_s}, {"mad_s", mad_s}, {"reps", reps}};
}

namespace {
double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  double x = v[m];
  if (v.size() % 2 == 0)
    x = (x + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m))) / 2;
  return x;
}
}  // namespace

Timing time_calls(const std::function<void(int rep)>& call, const TimingOptions& o) {
  using Clock = std::chrono::steady_clock;
  for (int w = 0; w < o.warmup; ++w) call(-1 - w);
  std::vector<double> t;
  double total = 0;
  while (static_cast<int>(t.size()) < o.max_reps) {
    if (static_cast<int>(t.size()) >= o.min_reps && total >= o.min_seconds) break;
    if (total >= o.max_seconds && !t.empty()) break;
    const auto t0 = Clock::now();
    call(static_cast<int>(t.size()));
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    t.push_back(s);
    total += s;
  }
  Timing r;
  r.reps = static_cast<int>(t.size());
  r.median_s = median_of(t);
  r.min_s = t.empty() ? 0 : *std::min_element(t.begin(), t.end());
  std::vector<double> dev;
  dev.reserve(t.size());
  for (double x : t) dev.push_back(std::fabs(x - r.median_s));
  r.mad_s = median_of(dev);
  return r;
}

namespace {
int empty_kernel(const cake_tensor* /*in*/, int /*n_in*/, cake_tensor* /*out*/, int /*n_out*/,
                 const double* /*params*/, int /*n_params*/) {
  return 0;
}
}  // namespace

double call_floor_seconds() {
  static const double s = [] {
    cake_run_fn volatile fn = &empty_kernel;  // volatile: the call stays indirect, as the runner's
    std::vector<cake_tensor> in(4), out(2);
    const double params[4] = {};
    TimingOptions o;
    o.warmup = 100;
    o.min_seconds = 0.005;
    o.min_reps = 2000;
    o.max_reps = 200000;
    const Timing t = time_calls([&](int) { fn(in.data(), 4, out.data(), 2, params, 4); }, o);
    return t.median_s;
  }();
  return s;
}

}  // namespace cake::eval
