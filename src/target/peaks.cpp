// Measured machine peaks: STREAM-triad memory bandwidth (f64), FP32 FMA and BF16 dot throughput, on 1 thread
// and on all usable cores, each the best of several repetitions. Compiled with -O3 (see CMakeLists.txt).
#include <immintrin.h>
#include <omp.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "core/error.h"
#include "target/machine.h"

namespace cake::target {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kMinArrayBytes = 64 * kMiB;  // per array; three arrays, far above a ~32 MB LLC
constexpr int64_t kMaxArrayBytes = 1024 * kMiB;
constexpr size_t kAlign = size_t{2} << 20;  // huge-page aligned
constexpr double kTriadScalar = 3.0;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The CPUs the calling thread may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Runs body(thread, n_threads) on `threads` OpenMP threads, each pinned to its own allowed CPU for the
// duration (the scheduler may otherwise stack two of them on one core while another process holds the
// other), and returns the seconds from the moment all of them are running (after a barrier) until the last
// one finishes: the fork and the wake-up of sleeping pool threads, which take milliseconds on a busy
// machine, are no part of a peak. Each thread's previous affinity is restored. *ran: threads given.
template <typename Body>
double timed_parallel(int threads, int* ran, const Body& body) {
  const std::vector<int> cpus = allowed_cpus();
  std::vector<Clock::time_point> start(threads), end(threads);
  int got = 1;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    cpu_set_t old;
    CPU_ZERO(&old);
    const bool pinned =
        n > 1 && size_t(n) <= cpus.size() && sched_getaffinity(0, sizeof old, &old) == 0 && [&] {
          cpu_set_t one;
          CPU_ZERO(&one);
          CPU_SET(cpus[t], &one);
          return sched_setaffinity(0, sizeof one, &one) == 0;
        }();
#pragma omp barrier
    start[t] = Clock::now();
    body(t, n);
    end[t] = Clock::now();
    if (pinned) sched_setaffinity(0, sizeof old, &old);
    if (t == 0) got = n;
  }
  if (ran) *ran = got;
  const auto first = *std::min_element(start.begin(), start.begin() + got);
  const auto last = *std::max_element(end.begin(), end.begin() + got);
  return std::chrono::duration<double>(last - first).count();
}

// ---- triad -------------------------------------------------------------------------------------------

// Bytes per triad array: at least 64 MiB and at least twice the last-level cache we believe in.
int64_t triad_array_bytes() {
  const int64_t l3 = believed_llc_bytes(detect_caches());
  int64_t bytes = std::max(kMinArrayBytes, 2 * l3);
  bytes = (bytes + int64_t(kAlign) - 1) / int64_t(kAlign) * int64_t(kAlign);
  return std::min(bytes, kMaxArrayBytes);
}

// The a[i] = b[i] + s*c[i] kernel on one thread's slice, cloned per ISA (resolved once at load time).
__attribute__((target_clones("avx512f", "avx2", "default"))) void triad_slice(double* __restrict a,
                                                                              const double* __restrict b,
                                                                              const double* __restrict c,
                                                                              double s, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// [begin, end) of thread t's slice of n elements split over `threads`, 8-element (64-byte) granular.
void slice(size_t n, int threads, int t, size_t& begin, size_t& end) {
  const size_t blocks = (n + 7) / 8;
  const size_t per = blocks / threads, extra = blocks % threads;
  const size_t b0 = t * per + std::min<size_t>(t, extra);
  const size_t b1 = b0 + per + (size_t(t) < extra ? 1 : 0);
  begin = std::min(n, b0 * 8);
  end = std::min(n, b1 * 8);
}

class TriadArrays {
 public:
  explicit TriadArrays(int64_t bytes_per_array, int touch_threads)
      : n_(size_t(bytes_per_array) / sizeof(double)) {
    for (double*& p : arr_) {
      p = static_cast<double*>(std::aligned_alloc(kAlign, n_ * sizeof(double)));
      if (!p) {
        release();
        throw Error("target: cannot allocate " + std::to_string(bytes_per_array >> 20) +
                    " MiB for the triad arrays");
      }
      // No MADV_HUGEPAGE: measure the pages that kernels' own buffers get.
    }
    // First touch (page faults) before any timing, by the threads that will use the pages.
#pragma omp parallel num_threads(touch_threads)
    {
      size_t b, e;
      slice(n_, omp_get_num_threads(), omp_get_thread_num(), b, e);
      for (size_t i = b; i < e; ++i) {
        arr_[0][i] = 0.0;
        arr_[1][i] = 1.0;
        arr_[2][i] = 2.0;
      }
    }
  }
  ~TriadArrays() {
    release();
  }
  TriadArrays(const TriadArrays&) = delete;
  TriadArrays& operator=(const TriadArrays&) = delete;

  size_t n() const {
    return n_;
  }

  // Seconds for one triad sweep over the arrays on `threads` threads.
  double sweep(int threads) {
    return timed_parallel(threads, nullptr, [this](int t, int n) {
      size_t b, e;
      slice(n_, n, t, b, e);
      triad_slice(arr_[0] + b, arr_[1] + b, arr_[2] + b, kTriadScalar, e - b);
    });
  }

  // Best GB/s (STREAM convention: 3 arrays × N × 8 bytes per sweep) over a few warm repetitions.
  double best_gbs(int threads) {
    sweep(threads);  // warm-up: thread pool, TLB, frequency
    double best = 1e30, total = 0;
    for (int rep = 0; rep < 30 && (rep < 6 || total < 0.08); ++rep) {
      const double t = sweep(threads);
      best = std::min(best, t);
      total += t;
    }
    return 3.0 * double(n_) * sizeof(double) / best / 1e9;
  }

 private:
  void release() {
    for (double*& p : arr_) {
      std::free(p);
      p = nullptr;
    }
  }
  size_t n_;
  double* arr_[3] = {nullptr, nullptr, nullptr};
};

// ---- FMA ---------------------------------------------------------------------------------------------

constexpr int kAcc = 12;  // independent accumulators: ≥ FMA latency × FMA pipes on current cores

// Each returns a value depending on every accumulator so nothing is dead; acc = acc*m + c converges to
// c/(1-m) = 0.1, far from overflow and denormals.
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  __m512 a0 = _mm512_set1_ps(0.01f), a1 = _mm512_set1_ps(0.02f), a2 = _mm512_set1_ps(0.03f);
  __m512 a3 = _mm512_set1_ps(0.04f), a4 = _mm512_set1_ps(0.05f), a5 = _mm512_set1_ps(0.06f);
  __m512 a6 = _mm512_set1_ps(0.07f), a7 = _mm512_set1_ps(0.08f), a8 = _mm512_set1_ps(0.09f);
  __m512 a9 = _mm512_set1_ps(0.11f), a10 = _mm512_set1_ps(0.12f), a11 = _mm512_set1_ps(0.13f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm512_fmadd_ps(a0, m, c);
    a1 = _mm512_fmadd_ps(a1, m, c);
    a2 = _mm512_fmadd_ps(a2, m, c);
    a3 = _mm512_fmadd_ps(a3, m, c);
    a4 = _mm512_fmadd_ps(a4, m, c);
    a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c);
    a7 = _mm512_fmadd_ps(a7, m, c);
    a8 = _mm512_fmadd_ps(a8, m, c);
    a9 = _mm512_fmadd_ps(a9, m, c);
    a10 = _mm512_fmadd_ps(a10, m, c);
    a11 = _mm512_fmadd_ps(a11, m, c);
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                               _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                                 _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  __m256 a0 = _mm256_set1_ps(0.01f), a1 = _mm256_set1_ps(0.02f), a2 = _mm256_set1_ps(0.03f);
  __m256 a3 = _mm256_set1_ps(0.04f), a4 = _mm256_set1_ps(0.05f), a5 = _mm256_set1_ps(0.06f);
  __m256 a6 = _mm256_set1_ps(0.07f), a7 = _mm256_set1_ps(0.08f), a8 = _mm256_set1_ps(0.09f);
  __m256 a9 = _mm256_set1_ps(0.11f), a10 = _mm256_set1_ps(0.12f), a11 = _mm256_set1_ps(0.13f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, m, c);
    a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c);
    a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c);
    a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
    a10 = _mm256_fmadd_ps(a10, m, c);
    a11 = _mm256_fmadd_ps(a11, m, c);
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                               _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
                                 _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

// BF16 dot product: each VDPBF16PS adds two bf16 products to every f32 lane. The accumulators grow by
// 2e-6 per iteration, far from overflow for any run this takes.
__attribute__((target("avx512f,avx512bf16"))) float bf16_dot_loop(int64_t iters) {
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3a83);  // bf16 ≈ 1.0e-3
  __m512 a[kAcc];
  for (int k = 0; k < kAcc; ++k) a[k] = _mm512_set1_ps(0.01f * float(k + 1));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAcc; ++k) a[k] = _mm512_dpbf16_ps(a[k], x, x);
  }
  __m512 s = a[0];
  for (int k = 1; k < kAcc; ++k) s = _mm512_add_ps(s, a[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float r = 0;
  for (float v : lanes) r += v;
  return r;
}

// Without hardware FMA: scalar multiply-add (counted as 2 flops), one lane.
float fma_loop_scalar(int64_t iters) {
  float a[kAcc];
  for (int k = 0; k < kAcc; ++k) a[k] = 0.01f * float(k + 1);
  for (int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < kAcc; ++k) a[k] = a[k] * 0.999999f + 1e-7f;
  float r = 0;
  for (float v : a) r += v;
  return r;
}

struct FmaKernel {
  float (*loop)(int64_t);
  int lanes;
  const char* isa;
};

FmaKernel pick_fma_kernel() {
  const Isa isa = detect_isa();
  if (isa.avx512f) return {fma_loop_avx512, 16, "avx512"};
  if (isa.avx2 && isa.fma) return {fma_loop_avx2, 8, "avx2"};
  return {fma_loop_scalar, 1, "scalar"};
}

volatile float g_sink = 0;

// One parallel run: returns seconds; *ran gets the thread count OpenMP actually gave.
double fma_run(const FmaKernel& k, int threads, int64_t iters, int* ran) {
  std::vector<float> out(threads);
  const double t = timed_parallel(threads, ran, [&](int i, int) { out[i] = k.loop(iters); });
  float total = 0;
  for (float v : out) total += v;
  g_sink = total;
  return t;
}

// Iterations for one thread to spend ≈ `seconds` in the loop, calibrated on the calling thread alone (a
// parallel calibration is at the mercy of fork/join and of a busy sibling core).
int64_t fma_iters_for(const FmaKernel& k, double seconds) {
  int64_t iters = int64_t{1} << 12;
  double t = 0;
  for (;;) {
    const auto t0 = Clock::now();
    g_sink = k.loop(iters);
    t = seconds_since(t0);
    if (t >= 4e-3 || iters >= (int64_t{1} << 40)) break;
    iters *= 2;
  }
  const auto t0 = Clock::now();
  g_sink = k.loop(iters);
  t = std::min(t, seconds_since(t0));
  return std::max(iters, int64_t(double(iters) * seconds / t));
}

double fma_best_gflops(const FmaKernel& k, int threads) {
  // Short repetitions (≈ 10 ms), so that some fall between the time slices of competing processes.
  const int64_t iters = fma_iters_for(k, 0.01);
  int ran = 1;
  fma_run(k, threads, iters, &ran);  // warm-up: thread pool, placement, frequency
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) best = std::min(best, fma_run(k, threads, iters, &ran));
  const double flops = double(ran) * double(iters) * kAcc * k.lanes * 2.0;
  return flops / best / 1e9;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int64_t believed_llc_bytes(const Caches& c) {
  return c.l3_sysfs_bytes > 0 ? c.l3_sysfs_bytes : (c.l3_reliable ? c.l3_bytes : 0);
}

double measure_triad_gbs(int threads) {
  threads = std::max(1, threads);
  TriadArrays arrays(triad_array_bytes(), std::max(threads, logical_cores()));
  return arrays.best_gbs(threads);
}

double measure_cache_triad_gbs(int64_t footprint) {
  // One thread sweeps arrays that fit its L2 many times in one timed span (a single sweep takes
  // microseconds, too short to time alone); best of several spans.
  const size_t n = size_t(std::max<int64_t>(footprint / 3, 4096)) / sizeof(double) / 8 * 8;
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const int sweeps = int(std::max<size_t>(64, (size_t{64} << 20) / (3 * n * sizeof(double))));
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = Clock::now();
    for (int s = 0; s < sweeps; ++s) {
      triad_slice(a.data(), b.data(), c.data(), kTriadScalar, n);
      asm volatile("" : : "r"(a.data()) : "memory");  // every sweep's stores happen
    }
    best = std::min(best, seconds_since(t0));
  }
  return 3.0 * double(n) * sizeof(double) * sweeps / best / 1e9;
}

double measure_fma_gflops(int threads) {
  return fma_best_gflops(pick_fma_kernel(), std::max(1, threads));
}

// 32 "lanes" of 2 flops: 16 f32 lanes, each adding two products.
double measure_bf16_dot_gflops(int threads) {
  if (!detect_isa().avx512bf16) return 0;
  return fma_best_gflops({bf16_dot_loop, 32, "avx512bf16"}, std::max(1, threads));
}

Peaks measure_peaks(const Progress& progress) {
  const auto t0 = Clock::now();
  Peaks p;
  p.threads = logical_cores();
  p.triad_array_bytes = triad_array_bytes();
  const FmaKernel k = pick_fma_kernel();
  p.fma_isa = k.isa;

  if (progress) {
    progress("memory bandwidth (STREAM triad, f64, 3 x " + std::to_string(p.triad_array_bytes >> 20) +
             " MiB)");
  }
  {
    TriadArrays arrays(p.triad_array_bytes, p.threads);
    // Two passes over both thread counts, keeping the best: bandwidth drifts on shared machines.
    for (int pass = 0; pass < 2; ++pass) {
      p.bandwidth_gbs_1t = std::max(p.bandwidth_gbs_1t, arrays.best_gbs(1));
      p.bandwidth_gbs = std::max(p.bandwidth_gbs, arrays.best_gbs(p.threads));
    }
  }
  // A quarter of L2 in all (within L2 whatever its associativity, and far above L1).
  const Caches caches = detect_caches();
  p.cache_triad_bytes = std::max<int64_t>(caches.l2_bytes > 0 ? caches.l2_bytes / 4 : 0, 96 << 10);
  if (progress) {
    progress("cache-resident bandwidth (triad, " + std::to_string(p.cache_triad_bytes >> 10) + " KiB)");
  }
  for (int pass = 0; pass < 2; ++pass) {
    p.cache_bandwidth_gbs_1t =
        std::max(p.cache_bandwidth_gbs_1t, measure_cache_triad_gbs(p.cache_triad_bytes));
  }
  // Three arrays of about half the LLC in all, each a whole number of huge pages; none when the LLC size is
  // not believable or too small to hold them apart from L2.
  const int64_t llc = believed_llc_bytes(caches);
  const int64_t llc_array = (llc / 6 + int64_t(kAlign) - 1) / int64_t(kAlign) * int64_t(kAlign);
  p.llc_triad_bytes = llc >= 8 * std::max<int64_t>(caches.l2_bytes, 1 << 20) ? 3 * llc_array : 0;
  if (p.llc_triad_bytes > 0) {
    if (progress) {
      progress("LLC-resident bandwidth (triad, 3 x " + std::to_string(llc_array >> 20) + " MiB)");
    }
    TriadArrays arrays(llc_array, p.threads);
    for (int pass = 0; pass < 2; ++pass) {
      p.llc_bandwidth_gbs_1t = std::max(p.llc_bandwidth_gbs_1t, arrays.best_gbs(1));
      p.llc_bandwidth_gbs = std::max(p.llc_bandwidth_gbs, arrays.best_gbs(p.threads));
    }
  }
  if (progress) progress(std::string("FP32 FMA peak (") + k.isa + ")");
  // At least two passes; up to four while the all-core figure has not reached 1.5x one thread (then a
  // sibling core was probably busy with other work) and the whole set is still short. Only more samples
  // are taken; the best is kept either way.
  for (int pass = 0; pass < 4; ++pass) {
    if (pass >= 2 && (p.threads == 1 || p.fma_gflops >= 1.5 * p.fma_gflops_1t || seconds_since(t0) > 1.2))
      break;
    p.fma_gflops_1t = std::max(p.fma_gflops_1t, fma_best_gflops(k, 1));
    p.fma_gflops = std::max(p.fma_gflops, p.threads > 1 ? fma_best_gflops(k, p.threads) : p.fma_gflops_1t);
  }
  p.bf16_dot_gflops_1t = 0;
  if (detect_isa().avx512bf16) {
    if (progress) progress("BF16 dot-product peak (vdpbf16ps)");
    for (int pass = 0; pass < 2; ++pass) {
      p.bf16_dot_gflops_1t = std::max(p.bf16_dot_gflops_1t, measure_bf16_dot_gflops(1));
      p.bf16_dot_gflops = std::max(p.bf16_dot_gflops,
                                   p.threads > 1 ? measure_bf16_dot_gflops(p.threads) : p.bf16_dot_gflops_1t);
    }
  }
  p.seconds = seconds_since(t0);
  p.measured_at = utc_now();
  return p;
}

}  // namespace cake::target
