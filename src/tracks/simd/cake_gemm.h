// Register-blocked contraction micro-kernels for simd-track kernels (shipped into the build directory as
// cake_gemm.h), written with Google Highway (static dispatch: the -march the kernel is compiled for).
// A tile of MR rows × NV vectors of C is kept in registers while k runs over a panel of B: packed
// (K × NV·lanes, contiguous, zero-padded past the last column), or read in place when A has too few rows
// to repay the packing; A is read through a functor that returns element (r, k) already converted to the
// accumulation type. Matrix times vector (one column of C) is a row of dot products instead. The bf16
// variants multiply pairs on VDPBF16PS.
#pragma once

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace cake_gemm {

namespace hn = hwy::HWY_NAMESPACE;

// The 16 bits of element i of p, taken from the aligned 32-bit word that holds them (little-endian: the
// element at a word's lower address is its low half): in a vectorized loop this is a 32-bit gather (there
// is no 16-bit one), and the word never leaves the element's aligned 4 bytes.
typedef uint32_t __attribute__((may_alias)) word32;
static inline uint16_t bits16(const uint16_t* p, int64_t i) {
  const char* base = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3});
  const int64_t at = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) & 3) + 2 * i;
  return static_cast<uint16_t>(*reinterpret_cast<const word32*>(base + (at & ~int64_t{3})) >> ((at & 2) * 8));
}

template <class Acc>
constexpr int64_t lanes() {
  return static_cast<int64_t>(hn::MaxLanes(hn::ScalableTag<Acc>()));
}

// Source element types of a contraction operand read straight from memory (no packing): bf16 and f16
// share a storage type, so the tag, not T, says how to widen.
struct src_f32 {
  using T = float;
};
struct src_f64 {
  using T = double;
};
struct src_bf16 {
  using T = uint16_t;
};
struct src_f16 {
  using T = uint16_t;
};

// Lanes(d) consecutive elements of Src at p, widened to d's type (never narrower than Src).
template <class Src, class D>
static inline hn::Vec<D> load_as(D d, const typename Src::T* p) {
  using Acc = hn::TFromD<D>;
  if constexpr (std::is_same_v<typename Src::T, Acc>) {
    return hn::LoadU(d, p);
  } else if constexpr (std::is_same_v<Acc, double>) {
    return hn::PromoteTo(d, load_as<Src>(hn::Rebind<float, D>(), p));
  } else if constexpr (std::is_same_v<Src, src_bf16>) {  // bf16 is the top half of an f32
    const hn::Rebind<uint32_t, D> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(hn::Rebind<uint16_t, D>(), p))));
  } else {
    static_assert(std::is_same_v<Src, src_f16>);
    return hn::PromoteTo(
        d, hn::LoadU(hn::Rebind<hwy::float16_t, D>(), reinterpret_cast<const hwy::float16_t*>(p)));
  }
}

// How far ahead along its rows a matrix-times-vector kernel prefetches A: MR rows stream at once, more
// than the hardware prefetchers keep ahead of (bf16 K=M=1024 from memory: 110–128 → 82–98 µs).
inline constexpr int64_t kPrefetchBytes = 1024;

// Prefetches the line `bytes` past p, which may lie past the end of p's array: the address is formed as
// an integer, and a prefetch never faults.
static inline void prefetch_at(const void* p, int64_t bytes) {
  __builtin_prefetch(
      reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)));
}

// sums[r] = Σ_lanes v[r] for r < R: the R vectors are folded pairwise (adjacent lanes added, of two
// vectors at once: ConcatEven + ConcatOdd), so R rows' horizontal sums take about log2(lanes) + log2(R)
// steps of two permutes and an add, not a reduction per row (attention's scores, six rows of 64 per
// call: docs/tracks.md). One row, or more rows than lanes, take one reduction per row.
template <int R, class D>
static inline void sum_lanes_of_rows(D d, const hn::Vec<D>* v, hn::TFromD<D>* sums) {
  constexpr int L = static_cast<int>(lanes<hn::TFromD<D>>());
  constexpr int P = static_cast<int>(std::bit_ceil(static_cast<unsigned>(R)));
  if constexpr (R == 1 || P > L) {
    for (int r = 0; r < R; ++r) sums[r] = hn::GetLane(hn::SumOfLanes(d, v[r]));
  } else {
    const auto fold = [&](hn::Vec<D> lo, hn::Vec<D> hi) {
      return hn::Add(hn::ConcatEven(d, hi, lo), hn::ConcatOdd(d, hi, lo));
    };
    // After the row levels, row r's partial sums are lanes [r·L/P, (r + 1)·L/P) of w[0]; each lane level
    // then halves their number, down to lane r.
    hn::Vec<D> w[P];
#pragma GCC unroll 32
    for (int r = 0; r < P; ++r) w[r] = r < R ? v[r] : hn::Zero(d);
    constexpr int kRowLevels = std::bit_width(static_cast<unsigned>(P)) - 1;
    constexpr int kLaneLevels = std::bit_width(static_cast<unsigned>(L / P)) - 1;
#pragma GCC unroll 8
    for (int level = 0; level < kRowLevels; ++level)
#pragma GCC unroll 16
      for (int i = 0; i < (P >> level) / 2; ++i) w[i] = fold(w[2 * i], w[2 * i + 1]);
#pragma GCC unroll 8
    for (int level = 0; level < kLaneLevels; ++level) w[0] = fold(w[0], w[0]);
    alignas(64) hn::TFromD<D> t[L];
    hn::Store(w[0], d, t);
#pragma GCC unroll 32
    for (int r = 0; r < R; ++r) sums[r] = t[r];
  }
}

// Matrix times vector: out[r · ostride] = Σ_k a[r][k] · b[k] for r < MR, rows of A and B contiguous along k
// and read in place. Each row keeps one vector of partial sums (MR independent chains) and every load of b
// serves all MR rows; A is prefetched kPrefetchBytes ahead, once per 64-byte line.
template <int MR, class Acc, class SrcA, class SrcB>
static inline void dot_rows(int64_t K, const typename SrcA::T* const* a, const typename SrcB::T* __restrict b,
                            Acc* __restrict out, int64_t ostride) {
  const hn::ScalableTag<Acc> d;
  constexpr int64_t L = lanes<Acc>();
  using V = hn::Vec<decltype(d)>;
  V acc[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc[r] = hn::Zero(d);
  constexpr int64_t kSize = sizeof(typename SrcA::T);
  int64_t k = 0;
  for (; k + L <= K; k += L) {
    if ((k * kSize) % 64 < L * kSize) {  // this step starts a line
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) prefetch_at(a[r], k * kSize + kPrefetchBytes);
    }
    const V bv = load_as<SrcB>(d, b + k);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[r] = hn::MulAdd(load_as<SrcA>(d, a[r] + k), bv, acc[r]);
  }
  const hn::CappedTag<Acc, 1> d1;  // the last K mod lanes elements, one at a time
  using V1 = hn::Vec<decltype(d1)>;
  V1 tail[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) tail[r] = hn::Zero(d1);
  for (; k < K; ++k) {
    const V1 bv = load_as<SrcB>(d1, b + k);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) tail[r] = hn::MulAdd(load_as<SrcA>(d1, a[r] + k), bv, tail[r]);
  }
  Acc sums[MR];
  sum_lanes_of_rows<MR>(d, acc, sums);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) out[r * ostride] = sums[r] + hn::GetLane(tail[r]);
}

// Calls f(std::integral_constant<int, R>()) for the smallest R in MR, ⌈MR/2⌉, ⌈MR/4⌉, …, 1 with R ≥ n
// (0 < n ≤ MR): a last tile of n rows runs a kernel of about n rows, not MR rows
// of which MR − n are thrown away, at log2(MR) instantiations per call site. The smaller ones are out of
// line, so that the MR-row kernel is compiled (registers allocated) as if it were alone.
template <int R, class F>
[[gnu::noinline]] static void call_rows(const F& f) {
  f(std::integral_constant<int, R>());
}
template <int MR, class F>
static inline void fewer_rows(int64_t n, const F& f) {
  if constexpr (MR > 1) {
    constexpr int H = (MR + 1) / 2;
    if (n <= H) return fewer_rows<H>(n, f);
  }
  call_rows<MR>(f);
}
template <int MR, class F>
static inline void with_rows(int64_t n, const F& f) {
  if constexpr (MR > 1) {
    if (n <= (MR + 1) / 2) return fewer_rows<(MR + 1) / 2>(n, f);
  }
  f(std::integral_constant<int, MR>());
}

// tile[r * NV·L + c] = Σ_k a(r, k) · B(k, c), for r < MR and c < NV·L, where b_row(d, k, v) returns
// vector v (columns v·L .. v·L + L - 1) of row k of B.
template <int MR, int NV, class Acc, class LoadB, class LoadA>
static inline void tile_with(int64_t K, const LoadB& b_row, const LoadA& a, Acc* __restrict out) {
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
    for (int v = 0; v < NV; ++v) b[v] = b_row(d, k, v);
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

// B from a packed panel: bp[k · NV·L + c] (K × NV·L, contiguous, zero-padded past the last column).
template <int MR, int NV, class Acc, class LoadA>
static inline void tile(int64_t K, const Acc* __restrict bp, const LoadA& a, Acc* __restrict out) {
  constexpr int64_t L = lanes<Acc>();
  tile_with<MR, NV, Acc>(
      K, [&](auto d, int64_t k, int v) { return hn::LoadU(d, bp + k * NV * L + v * L); }, a, out);
}

// B read in place, widened on load: row k starts at b + k · ldb and holds at least NV·L elements. For A
// with few rows, where packing B would cost as much as the product. B's rows are ldb apart, a stride the
// hardware prefetchers follow only a few rows ahead, so where B comes from memory the panel waits on
// it: given `ahead` (the same rows of a later panel), each row k of it is prefetched as row k is read.
template <int MR, int NV, class Acc, class SrcB, class LoadA>
static inline void tile_in_place(int64_t K, const typename SrcB::T* __restrict b, int64_t ldb, const LoadA& a,
                                 Acc* __restrict out, const typename SrcB::T* ahead = nullptr) {
  constexpr int64_t L = lanes<Acc>();
  const auto row = [&](auto d, int64_t k, int v) { return load_as<SrcB>(d, b + k * ldb + v * L); };
  if (ahead == nullptr) return tile_with<MR, NV, Acc>(K, row, a, out);
  constexpr int64_t kSize = sizeof(typename SrcB::T);
  tile_with<MR, NV, Acc>(
      K,
      [&](auto d, int64_t k, int v) {
        if (v == 0) {
          for (int64_t c = 0; c < NV * L * kSize; c += 64) prefetch_at(ahead, k * ldb * kSize + c);
        }
        return row(d, k, v);
      },
      a, out);
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

// Packs a panel of B for the dot product: bq[k2 · NR + c] = b(2·k2, c) | b(2·k2 + 1, c) << 16 for
// c < jn, 0 beyond, where b(k, c) = b[k · bsk + c · bsj]. Rows of contiguous columns that fill the panel
// take a copy without conditions: the masked copy serialized its iterations on the merge of the masked
// loads (batched_matmul bf16 32 × 256³ 0.92× the time, docs/tracks.md).
template <int64_t NR>
static inline void pack_bf16_pairs(const uint16_t* __restrict b, int64_t bsj, int64_t bsk, int64_t K,
                                   int64_t jn, uint32_t* __restrict bq) {
  for (int64_t k = 0; k < K; k += 2) {
    const uint16_t* lo = b + k * bsk;
    uint32_t* q = bq + k / 2 * NR;
    if (bsj == 1 && jn == NR && k + 1 < K) {
#pragma omp simd
      for (int64_t c = 0; c < NR; ++c) q[c] = (uint32_t)lo[c] | (uint32_t)lo[c + bsk] << 16;
    } else {
      for (int64_t c = 0; c < NR; ++c)
        q[c] = c < jn ? (uint32_t)lo[c * bsj] | (k + 1 < K ? (uint32_t)lo[c * bsj + bsk] << 16 : 0u) : 0u;
    }
  }
}

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

// dot_rows on the bf16 dot product: out[r · ostride] = Σ_k a[r][k] · b[k], both read in place 32
// elements (16 pairs, one line) at a time and summed in f32; the last K mod 32 are loaded under a mask, as
// zeros. A is prefetched as in dot_rows.
template <int MR, class Out>
static inline void dot_rows_bf16(int64_t K, const uint16_t* const* a, const uint16_t* __restrict b,
                                 Out* __restrict out, int64_t ostride) {
#if defined(__AVX512BF16__)
  __m512 acc[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) prefetch_at(a[r], 2 * k + kPrefetchBytes);
    const __mmask32 m = K - k >= 32 ? ~__mmask32{0} : (__mmask32{1} << (K - k)) - 1;
    const __m512bh bv = (__m512bh)_mm512_maskz_loadu_epi16(m, b + k);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_maskz_loadu_epi16(m, a[r] + k), bv);
  }
  const hn::Full512<float> d;
  hn::Vec512<float> v[MR];
  float sums[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) v[r] = hn::Vec512<float>{acc[r]};
  sum_lanes_of_rows<MR>(d, v, sums);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) out[r * ostride] = static_cast<Out>(sums[r]);
#else
  (void)K, (void)a, (void)b, (void)out, (void)ostride;
  static_assert(sizeof(Out) == 0, "dot_rows_bf16 needs AVX512-BF16 (compile with -march supporting it)");
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
