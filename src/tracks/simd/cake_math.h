// Math for simd-track kernels (shipped into the build directory as cake_math.h): branch-free f32
// exp / log / erf / sigmoid that the compiler can vectorize inside `#pragma omp simd` loops, NaN-propagating
// min / max, the error flag data-dependent index checks set, the horizontal combines of a reduction's
// vector lanes, a short row's copy as one masked block, and f16 conversions by F16C. f64 overloads defer to
// <cmath>. Accuracy (f32): exp within 2 ulp; log within 1 ulp; erf within ~3e-7 relative (Taylor series below
// 0.5, a rational-exponential erfc fit above); 1 + erf within 5e-7 relative near 0 and 1e-5 in the far
// negative tail (the erfc fit throughout). Polynomials are in Estrin's form: a vectorized loop over these is
// bound by the chain's latency, not by the FMA count (gelu, f32, in cache: 1.06 -> 0.92 ns per element).
#pragma once

#include <hwy/highway.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "cake_prelude.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// A row of n elements of 2, 4 or 8 bytes, shorter than 64 bytes, from src to dst (distinct rows): one masked
// 64-byte load and store, which read and write nothing past the row. GCC's loop leaves such a row to its
// scalar and narrower epilogues: index_select f32 D=7 K=8192 24-37 -> 13 us. A masked block whose masked-off
// part lies in an unmapped page costs a fault-suppression assist (180 ns here, against 1 ns), and a tensor
// may end just before one (the sandbox's guard pages; a large allocation's last page): a block that would
// cross a page boundary is copied element by element instead.
template <class T>
static inline void cake_copy_short_row(T* __restrict dst, const T* __restrict src, int64_t n) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "2-, 4- or 8-byte elements");
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
  constexpr uintptr_t kPage = 4096;
  if ((reinterpret_cast<uintptr_t>(src) & (kPage - 1)) <= kPage - 64 &&
      (reinterpret_cast<uintptr_t>(dst) & (kPage - 1)) <= kPage - 64) {
    const auto left = static_cast<unsigned>(n);
    if constexpr (sizeof(T) == 2) {
      const __mmask32 m = _bzhi_u32(~0u, left);
      _mm512_mask_storeu_epi16(dst, m, _mm512_maskz_loadu_epi16(m, src));
    } else if constexpr (sizeof(T) == 4) {
      const auto m = static_cast<__mmask16>(_bzhi_u32(0xffffu, left));
      _mm512_mask_storeu_epi32(dst, m, _mm512_maskz_loadu_epi32(m, src));
    } else {
      const auto m = static_cast<__mmask8>(_bzhi_u32(0xffu, left));
      _mm512_mask_storeu_epi64(dst, m, _mm512_maskz_loadu_epi64(m, src));
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// A block of a row staged in a small buffer (src), out to dst (knob `stream`): the whole 64-byte lines of
// dst by non-temporal stores, which write a line without reading it first (an ordinary store that misses
// reads the line, then writes it back: a third of a large copy's memory traffic), the partial lines at
// either end by masked ordinary stores (a neighbouring row may share them). bf16 copy of 32 MiB, one
// thread, inputs from memory: 3.8-4.4 -> 2.6-3.4 ms with 4 KiB blocks; an SFENCE per block cost most of
// that back, so there is none here: every thread of a region that streams fences once before the region's
// barrier, and the kernel once before it returns (cake_stream_fence).
static inline void cake_stream_out(void* dst, const void* src, int64_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__BMI2__)
  int64_t head = static_cast<int64_t>((64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63);
  head = head < bytes ? head : bytes;
  if (head > 0) {
    const __mmask64 m = _bzhi_u64(~0ull, static_cast<unsigned>(head));
    _mm512_mask_storeu_epi8(d, m, _mm512_maskz_loadu_epi8(m, s));
  }
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
  if (bytes > 0) {
    const __mmask64 m = _bzhi_u64(~0ull, static_cast<unsigned>(bytes));
    _mm512_mask_storeu_epi8(d, m, _mm512_maskz_loadu_epi8(m, s));
  }
#else
  memcpy(d, s, static_cast<size_t>(bytes));
#endif
}
static inline void cake_stream_fence() {
#if defined(__AVX512F__)
  _mm_sfence();
#endif
}

// A staged block of n f32 values out to f32, bf16 or f16 storage at dst (staged rows), non-temporally
// when nt (cake_stream_out). The bf16 and f16 forms convert 32 / 16 values per instruction where the CPU
// has one (VCVTNE2PS2BF16, VCVTPS2PH) instead of a dozen integer operations per vector in the prelude's
// branch-free forms, with the same bits: round to nearest even, NaNs quiet with their payload's top bits.
// VCVTNE2PS2BF16 flushes subnormal inputs to zero, so a group of 32 that holds one takes the prelude's
// form. A block is at most kCakeStageBlock values.
constexpr int64_t kCakeStageBlock = 1024;
static inline void cake_write_block(void* dst, const void* src, int64_t bytes, bool nt) {
  if (nt) {
    cake_stream_out(dst, src, bytes);
  } else {
    memcpy(dst, src, static_cast<size_t>(bytes));
  }
}
static inline void cake_put_f32(float* dst, const float* src, int64_t n, bool nt) {
  cake_write_block(dst, src, n * 4, nt);
}
static inline void cake_put_bf16(uint16_t* dst, const float* src, int64_t n, bool nt) {
  alignas(64) uint16_t h[kCakeStageBlock];
  int64_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    if (_mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20)) {  // 0x20: subnormal
      for (int64_t k = i; k < i + 32; ++k) h[k] = cake_f32_to_bf16(src[k]);
    } else {
      _mm512_store_si512(h + i, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
  }
#endif
  for (; i < n; ++i) h[i] = cake_f32_to_bf16(src[i]);
  cake_write_block(dst, h, n * 2, nt);
}
static inline void cake_put_f16(uint16_t* dst, const float* src, int64_t n, bool nt) {
  alignas(64) uint16_t h[kCakeStageBlock];
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    const __m256i v =
        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_store_si256(reinterpret_cast<__m256i*>(h + i), v);
  }
#endif
  for (; i < n; ++i) h[i] = cake_f32_to_f16(src[i]);
  cake_write_block(dst, h, n * 2, nt);
}

// f16 <-> f32 by F16C's VCVTPH2PS / VCVTPS2PH (knob `f16c`). GCC 12 vectorizes no F16C conversion without
// AVX512-FP16, so the two are OpenMP simd functions: the declarations tell the vectorizer that 16- and 8-lane
// AVX-512 variants exist, and the definitions below supply them under the x86 vector function ABI's names
// (_ZGVe: AVX-512; N: not in a branch; 16 / 8 lanes; v: one vector argument). A vectorized loop then makes
// one call per 16 elements (add f16 M=127 N=1023: 70.6 -> 40.3 µs). GCC 12 does not if-convert a
// loop with a call, so a loop whose conversions sit under a condition stays scalar: on by default only where
// every statement is elementwise (simd_track.cpp).
// The f16 operand travels as an int32_t: GCC makes no simd variant of a 16-bit argument. Elsewhere
// (no AVX-512 or F16C, no OpenMP) the two are the prelude's branch-free forms, which round every number
// the same (a NaN stays a NaN; its payload may differ).
#if defined(__AVX512F__) && defined(__F16C__) && defined(_OPENMP)
extern "C" {
#pragma omp declare simd notinbranch simdlen(16)
#pragma omp declare simd notinbranch simdlen(8)
__attribute__((const, nothrow, leaf)) float cake_f16c_ld(int32_t h);
#pragma omp declare simd notinbranch simdlen(16)
#pragma omp declare simd notinbranch simdlen(8)
__attribute__((const, nothrow, leaf)) int32_t cake_f16c_st(float f);
}
// Local to the kernel's object; `used` keeps the definitions the vectorizer's calls need.
#define CAKE_F16C_DEF(ret, name, arg, asm_name) static __attribute__((used)) ret name(arg) __asm__(asm_name);
CAKE_F16C_DEF(float, cake_f16c_ld_1, int32_t h, "cake_f16c_ld")
CAKE_F16C_DEF(__m256, cake_f16c_ld_8, __m256i h, "_ZGVeN8v_cake_f16c_ld")
CAKE_F16C_DEF(__m512, cake_f16c_ld_16, __m512i h, "_ZGVeN16v_cake_f16c_ld")
CAKE_F16C_DEF(int32_t, cake_f16c_st_1, float f, "cake_f16c_st")
CAKE_F16C_DEF(__m256i, cake_f16c_st_8, __m256 f, "_ZGVeN8v_cake_f16c_st")
CAKE_F16C_DEF(__m512i, cake_f16c_st_16, __m512 f, "_ZGVeN16v_cake_f16c_st")
#undef CAKE_F16C_DEF
static float cake_f16c_ld_1(int32_t h) {
  return _cvtsh_ss(static_cast<unsigned short>(h));
}
static __m256 cake_f16c_ld_8(__m256i h) {
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(h));
}
static __m512 cake_f16c_ld_16(__m512i h) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
}
static int32_t cake_f16c_st_1(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
static __m256i cake_f16c_st_8(__m256 f) {
  return _mm256_cvtepu16_epi32(_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static __m512i cake_f16c_st_16(__m512 f) {
  return _mm512_cvtepu16_epi32(_mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
#else
static inline float cake_f16c_ld(int32_t h) {
  return cake_f16_to_f32(static_cast<uint16_t>(h));
}
static inline int32_t cake_f16c_st(float f) {
  return cake_f32_to_f16(f);
}
#endif

static inline void cake_set_error(int* err, int code) {
  __atomic_store_n(err, code, __ATOMIC_RELAXED);
}

template <class T>
static inline T cake_fmax(T a, T b) {
  return (a != a || b != b) ? a + b : (a > b ? a : b);
}
template <class T>
static inline T cake_fmin(T a, T b) {
  return (a != a || b != b) ? a + b : (a < b ? a : b);
}
// cake_fmax / cake_fmin where operand a (LitFirst) or b is a literal, never NaN: one comparison, whose
// select returns the other operand whenever it is false, NaN included, and the same operand on ties as
// cake_fmax / cake_fmin (so zeros keep their sign alike). A clamp to literal bounds is then a max and a min.
template <bool LitFirst, class T>
static inline T cake_fmax_lit(T a, T b) {
  if constexpr (LitFirst) {
    return a > b ? a : b;
  } else {
    return b >= a ? b : a;
  }
}
template <bool LitFirst, class T>
static inline T cake_fmin_lit(T a, T b) {
  if constexpr (LitFirst) {
    return a < b ? a : b;
  } else {
    return b <= a ? b : a;
  }
}

// The prelude's cake_to_i8 (NaN to 0, saturating, truncating toward zero) in the operand's own type: every
// int8 value is an f32, so an f32 operand clamps in f32 lanes (16 per vector, not 8 in f64), and an integer
// clamps as an integer.
static inline int8_t cake_i8(double v) {
  return cake_to_i8(v);
}
static inline int8_t cake_i8(float v) {
  float t = v != v ? 0.0f : v;
  t = t < -128.0f ? -128.0f : t;
  return (int8_t)(int32_t)(t > 127.0f ? 127.0f : t);
}
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
static inline int8_t cake_i8(I v) {
  const int64_t w = (int64_t)v;
  return (int8_t)(w < -128 ? -128 : (w > 127 ? 127 : w));
}

// v where mask m is all ones, +0 (or 0) where it is 0: bits, not a select, which GCC kept as a branch on
// the loop-invariant condition and then did not vectorize the loop across rows. A term past a short row's
// end adds +0, which leaves every partial sum as it was: a sum from +0 is never -0 (x + -x is +0).
static inline float cake_keep(float v, uint64_t m) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u &= (uint32_t)m;
  memcpy(&v, &u, 4);
  return v;
}
static inline double cake_keep(double v, uint64_t m) {
  uint64_t u;
  memcpy(&u, &v, 8);
  u &= m;
  memcpy(&v, &u, 8);
  return v;
}
static inline int64_t cake_keep(int64_t v, uint64_t m) {
  return (int64_t)((uint64_t)v & m);
}

// NaN needs no test: it passes the clamp (both comparisons are false) and the arithmetic, and no step
// converts it to an integer (2^n comes from the bits of the rounding sum, not from a conversion of n).
static inline float cake_exp(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  // x = n ln2 + r, |r| <= ln2/2; n rounded to nearest by the 1.5 * 2^23 trick (exact for |n| < 2^22): the
  // sum k's low mantissa bits hold n + 2^22, so n as an integer is k's bits less those of 1.5 * 2^23.
  const float k = xc * 1.44269504088896341f + 12582912.0f;
  const float n = k - 12582912.0f;
  float r = xc - n * 0.693145751953125f;  // ln2, high part (exact product)
  r = r - n * 1.428606765330187e-06f;     // ln2, low part
  // The degree-7 Taylor polynomial in Estrin's form (three dependent steps instead of seven).
  const float r2 = r * r, r4 = r2 * r2;
  const float p = ((1.0f / 6.0f * r + 0.5f) * r2 + (r + 1.0f)) +
                  ((1.0f / 5040.0f * r + 1.0f / 720.0f) * r2 + (1.0f / 120.0f * r + 1.0f / 24.0f)) * r4;
  // 2^n as two factors so results reach down into the subnormals and up to infinity.
  const int32_t ni = std::bit_cast<int32_t>(k) - 0x4b400000;
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}
static inline double cake_exp(double x) {
  return std::exp(x);
}

// log: x = 2^e · m with m in [√½, √2), log x = e·ln2 + log(1 + f) for f = m - 1, where with s = f / (2 + f)
// and z = s², log(1 + f) = f - (f²/2 - s·(f²/2 + R)), R = Σ_k 2 z^k / (2k + 1) (the atanh series; four terms
// leave 7e-10 since |s| < 0.172). Subnormals are scaled by 2^23 first; x < 0 and NaN give NaN, 0 gives -inf.
static inline float cake_log(float x) {
  const bool sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x;
  const uint32_t b = std::bit_cast<uint32_t>(xs);
  uint32_t mb = (b & 0x007fffffu) | 0x3f800000u;
  const bool big = mb > 0x3fb504f3u;  // m > √2: halve it
  mb = big ? mb - 0x00800000u : mb;
  const float e = static_cast<float>(static_cast<int32_t>(b >> 23) - 127 - (sub ? 23 : 0) + (big ? 1 : 0));
  const float f = std::bit_cast<float>(mb) - 1.0f;
  const float s = f / (2.0f + f), z = s * s, hfsq = 0.5f * f * f;
  const float r = z * (2.0f / 3.0f + z * (2.0f / 5.0f + z * (2.0f / 7.0f + z * (2.0f / 9.0f))));
  const float y = e * 0.693145751953125f - ((hfsq - (s * (hfsq + r) + e * 1.428606765330187e-06f)) - f);
  // Three selects of floats, each on one comparison: a chain of ?: on combined conditions left GCC a select
  // of masks when the argument came from cake_exp (log_softmax's rows of one), which it cannot vectorize.
  float res = x == std::numeric_limits<float>::infinity() ? x : y;
  res = x == 0.0f ? -std::numeric_limits<float>::infinity() : res;
  return x >= 0.0f ? res : std::numeric_limits<float>::quiet_NaN();  // x < 0 and NaN
}
static inline double cake_log(double x) {
  return std::log(x);
}

// erfc(a) for a >= 0: t·exp(-a² + P(t)), t = 1/(1 + a/2) (fractional error below 1.2e-7 in exact arithmetic).
// P(t) in Estrin's form (pairs, then pairs of pairs by t², t⁴, t⁸): four dependent steps instead of Horner's
// nine, so a vectorized loop is not held up by the chain's latency.
static inline float cake_erfc_nonneg(float a) {
  const float t = 1.0f / (1.0f + 0.5f * a);
  const float t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
  const float q0 = 1.00002368f * t - 1.26551223f, q1 = 0.09678418f * t + 0.37409196f;
  const float q2 = 0.27886807f * t - 0.18628806f, q3 = 1.48851587f * t - 1.13520398f;
  const float q4 = 0.17087277f * t - 0.82215223f;
  const float p = (q0 + q1 * t2) + (q2 + q3 * t2) * t4 + q4 * t8;
  return t * cake_exp(-a * a + p);
}
// erf(x) for |x| < 0.5: the Taylor series 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1)), to k = 6.
static inline float cake_erf_small(float x) {
  const float x2 = x * x;
  float p = 1.2055332981789664e-4f;
  p = p * x2 - 8.5483270234508528e-4f;
  p = p * x2 + 5.2239776254421878e-3f;
  p = p * x2 - 2.6866170645131252e-2f;
  p = p * x2 + 1.1283791670955126e-1f;
  p = p * x2 - 3.7612638903183754e-1f;
  p = p * x2 + 1.1283791670955126f;
  return x * p;
}
static inline float cake_erf(float x) {
  const float a = std::fabs(x);
  const float big = std::copysign(1.0f - cake_erfc_nonneg(a), x);
  return a < 0.5f ? cake_erf_small(x) : big;
}
static inline double cake_erf(double x) {
  return std::erf(x);
}

// 1 + erf(z), without the cancellation of the sum where erf(z) is near -1: erfc(|z|) there, 2 - erfc(z)
// above 0. One erfc serves the whole range: near 0 the sum is near 1, so erfc's absolute error is its
// relative error (erf's Taylor branch is for erf itself, which is near 0 there). Within 5e-7 relative up to
// |z| = 0.6, 5e-6 in the far tail (exp of a large argument); the branch-free form costs half of erf + 1.
static inline float cake_erf1p(float z) {
  const float ec = cake_erfc_nonneg(std::fabs(z));
  return z < 0.0f ? ec : 2.0f - ec;
}
static inline double cake_erf1p(double z) {
  return std::erfc(-z);
}

static inline float cake_sigmoid(float x) {
  return 1.0f / (1.0f + cake_exp(-x));
}
static inline double cake_sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Horizontal combines of the vector lanes of a reduction (a GCC vector of 64 bytes, see lane_reduction in
// the simd track): Highway vectors of the target's width, combined across the 64 bytes, then across lanes.
namespace cake_lanes {
namespace hn = hwy::HWY_NAMESPACE;
template <class V>
using elem = std::remove_cvref_t<decltype(std::declval<V>()[0])>;

template <class V, class Op, class Across>
static inline elem<V> combine(const V& v, Op op, Across across) {
  using T = elem<V>;
  const hn::ScalableTag<T> d;
  const T* p = reinterpret_cast<const T*>(&v);
  auto a = hn::LoadU(d, p);
  for (size_t i = hn::Lanes(d); i < sizeof(V) / sizeof(T); i += hn::Lanes(d)) a = op(a, hn::LoadU(d, p + i));
  return hn::GetLane(across(d, a));
}
// A block of one vector of a lane reduction, read back from the buffer its `omp simd` loop stored it in, as
// two 32-byte loads. GCC stores such a block as two 32-byte halves (f32 terms widened to f64 converted in
// halves, a masked block's lanes), and a 64-byte load spanning two stores cannot take its data from the
// store buffer: it waits until both stores reach the cache, a stall on every such block (rms_norm f32
// N=1000 D=17: 27 -> 8 µs, D=33: 21 -> 12 µs). A load contained in one store forwards whatever its width.
template <class V>
static inline V load_halves(const elem<V>* p) {
  using T = elem<V>;
  typedef T H __attribute__((vector_size(32)));
  const H lo = *reinterpret_cast<const H*>(p), hi = *reinterpret_cast<const H*>(p + 32 / sizeof(T));
  if constexpr (sizeof(T) == 8) {
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7);
  } else {
    static_assert(sizeof(T) == 4, "lane reductions hold 4- or 8-byte lanes");
    return __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
}

template <class V>
static inline elem<V> sum(const V& v) {
  return combine(
      v, [](auto a, auto b) { return hn::Add(a, b); }, [](auto d, auto a) { return hn::SumOfLanes(d, a); });
}
template <class V>
static inline elem<V> max(const V& v) {
  return combine(
      v, [](auto a, auto b) { return hn::Max(a, b); }, [](auto d, auto a) { return hn::MaxOfLanes(d, a); });
}
template <class V>
static inline elem<V> min(const V& v) {
  return combine(
      v, [](auto a, auto b) { return hn::Min(a, b); }, [](auto d, auto a) { return hn::MinOfLanes(d, a); });
}
template <class V>
static inline elem<V> prod(const V& v) {
  elem<V> p = v[0];
  for (size_t i = 1; i < sizeof(V) / sizeof(elem<V>); ++i) p *= v[i];
  return p;
}
// Whether any lane of a comparison mask (lanes 0 or -1) is set.
template <class M>
static inline bool any(const M& m) {
  return min(m) != 0;
}
}  // namespace cake_lanes
