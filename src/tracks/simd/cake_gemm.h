// Register-blocked contraction micro-kernel for simd-track kernels (shipped into the build directory as
// cake_gemm.h), written with Google Highway (static dispatch: the -march the kernel is compiled for).
// A tile of MR rows × NV vectors of C is kept in registers while k runs over a packed panel of B
// (K × NV·lanes, contiguous, zero-padded past the last column); A is read through a functor that returns
// element (r, k) already converted to the accumulation type.
#pragma once

#include <hwy/highway.h>

#include <cstdint>

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

}  // namespace cake_gemm
