// Register-blocked contraction micro-kernel for simd-track kernels (shipped into the build directory as
// cake_gemm.h), written with Google Highway (static dispatch: the -march the kernel is compiled for).
// A tile of MR rows × NV vectors of C is kept in registers while k runs over a packed panel of B
// (K × NV·lanes, contiguous, zero-padded past the last column); A is read through a functor that returns
// element (r, k) already converted to the accumulation type.
#pragma once

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace cake_gemm {

namespace hn = hwy::HWY_NAMESPACE;

template <class Acc>
constexpr int64_t lanes() {
  return static_cast<int64_t>(hn::MaxLanes(hn::ScalableTag<Acc>()));
}

// tile[r * NV·L + c] = Σ_k a(r, k) · bp[k · NV·L + c], for r < MR and c < NV·L.
template <int MR, int NV, class Acc, class LoadA>
static inline void tile(int64_t K, const Acc* __restrict bp, const LoadA& a, Acc* __restrict out) {
  const hn::ScalableTag<Acc> d;
  constexpr int64_t L = lanes<Acc>();
  using V = hn::Vec<decltype(d)>;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::Zero(d);
  for (int64_t k = 0; k < K; ++k) {
    V b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(d, bp + k * NV * L + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V ar = hn::Set(d, a(r, k));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(ar, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, out + r * NV * L + v * L);
}

// The bf16 dot-product path (knob bf16_dot): VDPBF16PS multiplies pairs of bf16 and adds both products
// to an f32 lane, twice the f32 FMA's multiply-adds per instruction. Operands come as pairs along k packed
// in 32 bits (element k in the low half, k + 1 in the high half); an odd K ends with a zero high half.
#if defined(__AVX512BF16__)
inline constexpr bool kBf16Dot = true;
#else
inline constexpr bool kBf16Dot = false;
#endif
inline constexpr int64_t kBf16DotLanes = 16;  // f32 lanes of one 512-bit VDPBF16PS result

// tile[r * NV·16 + c] = Σ_k2 a2(r, k2) ·pair bq[k2 · NV·16 + c], for r < MR and c < NV·16, stored as Out.
// a2(r, k2) returns row r's pair k2 as packed above.
template <int MR, int NV, class Out, class LoadA2>
static inline void tile_bf16(int64_t K2, const uint32_t* __restrict bq, const LoadA2& a2,
                             Out* __restrict out) {
#if defined(__AVX512BF16__)
  constexpr int64_t L = kBf16DotLanes;
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k2 = 0; k2 < K2; ++k2) {
    __m512bh b[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(bq + k2 * NV * L + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a2(r, k2)));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, b[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if constexpr (std::is_same_v<Out, float>) {
        _mm512_storeu_ps(out + r * NV * L + v * L, acc[r][v]);
      } else {
        alignas(64) float t[L];
        _mm512_store_ps(t, acc[r][v]);
        for (int64_t c = 0; c < L; ++c) out[r * NV * L + v * L + c] = static_cast<Out>(t[c]);
      }
    }
#else
  (void)K2, (void)bq, (void)a2, (void)out;
  static_assert(sizeof(Out) == 0, "tile_bf16 needs AVX512-BF16 (compile with -march supporting it)");
#endif
}

// tile_bf16 for rows of A contiguous along k: row r starts at a[r]; its pairs are read as 32-bit words
// (one load and broadcast per pair), and an odd K's last element is paired with zero.
template <int MR, int NV, class Out>
static inline void tile_bf16_rows(int64_t K, const uint32_t* __restrict bq, const uint16_t* const* a,
                                  Out* __restrict out) {
  const int64_t K2 = K / 2;
  tile_bf16<MR, NV>((K + 1) / 2, bq,
                    [&](int r, int64_t k2) -> uint32_t {
                      if (k2 < K2) {
                        uint32_t w;
                        __builtin_memcpy(&w, a[r] + 2 * k2, sizeof w);
                        return w;
                      }
                      return a[r][K - 1];
                    },
                    out);
}

}  // namespace cake_gemm
