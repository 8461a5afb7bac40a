// Checks of a track's f16 conversions shared by the tracks' tests (simd's f16c_test, halide_track_test):
// f16 equality that counts every NaN alike, a sweep of f32 bit patterns of every class f16 rounding cares
// about, and cast's f32 -> f16 stores against core's rounding over that sweep.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace cake::testing_f16 {

// Equal as f16 values: the same bits, or both NaN.
inline bool same_half(uint16_t got, uint16_t want) {
  const bool nan_got = (got & 0x7fffu) > 0x7c00u, nan_want = (want & 0x7fffu) > 0x7c00u;
  return nan_got || nan_want ? nan_got && nan_want : got == want;
}

// f32 bit patterns: every exponent of both signs with random mantissas, ties and near-ties of f16's
// rounding, f16's subnormal range, the overflow boundary, infinities and NaNs.
inline std::vector<float> f32_sweep(int64_t n) {
  std::mt19937 rng(11);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = rng();
    switch (i % 4) {
      case 0:
        break;  // anything
      case 1:
        u = (u & 0x807fffffu) | ((100u + u % 60u) << 23);  // f16's exponent range and just outside it
        break;
      case 2:
        u = (u & 0xffffe000u) | (rng() % 2 ? 0x1000u : 0x0fffu);  // a tie or just below one
        break;
      default:
        u = (u & 0x80000000u) | (0x477fe000u + rng() % 0x4000u);  // around 65504 and 65520
    }
    v[static_cast<size_t>(i)] = std::bit_cast<float>(u);
  }
  return v;
}

// Cast's (bench/ops/cast.yaml) f32 -> f16 stores in kernel k against core's rounding, on rows of 1000 (62
// vectors of 16 and a tail of 8) and of 7 (a scalar tail).
inline void expect_stores_round_as_core(const CheckedContract& c, const build::Kernel& k) {
  for (const auto& [rows, cols] : std::array<std::pair<int64_t, int64_t>, 2>{{{1024, 1000}, {3, 7}}}) {
    const std::vector<float> x = f32_sweep(rows * cols);
    std::vector<Tensor> in, out;
    in.emplace_back(DType::f32, Shape{rows, cols});
    std::memcpy(in[0].data(), x.data(), x.size() * sizeof(float));
    out.emplace_back(DType::f16, Shape{rows, cols});
    const cases::Case kc = cases::make_case(c, {{"N", rows}, {"D", cols}}, DType::f16);
    ASSERT_EQ(k.run(in, out, cases::kernel_params(c, kc)), 0);
    const auto* y = static_cast<const uint16_t*>(out[0].data());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(same_half(y[i], f32_to_f16_bits(x[i])))
          << "x bits " << std::bit_cast<uint32_t>(x[i]) << ": got " << y[i] << ", core "
          << f32_to_f16_bits(x[i]);
    }
  }
}

}  // namespace cake::testing_f16
