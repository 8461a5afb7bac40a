// The support code generated kernels ship with: the simd track's vectorizable f32 math (cake_math.h)
// against <cmath> in double, and the prelude's f16 / bf16 conversions and floor division against
// core's exact implementations.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cake_math.h"
#include "cake_prelude.h"
#include "core/dtype.h"

namespace {

double rel(double got, double want) {
  return std::fabs(got - want) / std::fabs(want);
}

TEST(SimdMath, ExpIsWithinTwoUlpOverTheWholeRange) {
  double worst = 0;
  for (double x = -87.0; x <= 88.5; x += 0.0013) {
    const float xf = static_cast<float>(x);
    worst = std::max(worst, rel(cake_exp(xf), std::exp(static_cast<double>(xf))));
  }
  EXPECT_LT(worst, 2.5e-7);  // 2 ulp of f32 is 2.4e-7 relative
  EXPECT_TRUE(std::isnan(cake_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(cake_exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(cake_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cake_exp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(cake_exp(-200.0f), 0.0f);
  // subnormal results: within one subnormal quantum (2^-149) of the correctly rounded value
  EXPECT_LE(std::fabs(cake_exp(-100.0f) - static_cast<float>(std::exp(-100.0))), 1.5e-45f);
}

TEST(SimdMath, LogIsWithinOneUlpOfItsResult) {
  // Every 97th float from the smallest subnormal to +inf: the error in ulps of the f32 result.
  double worst = 0;
  for (uint32_t b = 1; b < 0x7f800000u; b += 97) {
    const float x = std::bit_cast<float>(b);
    const double want = std::log(static_cast<double>(x));
    const double ulp = std::max(std::ldexp(1.0, std::ilogb(want) - 23), std::ldexp(1.0, -149));
    worst = std::max(worst, std::fabs(cake_log(x) - want) / ulp);
  }
  EXPECT_LT(worst, 1.0);  // 0.75 measured
  EXPECT_EQ(cake_log(1.0f), 0.0f);
  EXPECT_EQ(cake_log(0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(cake_log(-0.0f), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(cake_log(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cake_log(-1.0f)));
  EXPECT_TRUE(std::isnan(cake_log(-std::numeric_limits<float>::infinity())));
  EXPECT_TRUE(std::isnan(cake_log(std::numeric_limits<float>::quiet_NaN())));
}

TEST(SimdMath, ErfAndOnePlusErfAreAccurateWhereTheGateLooks) {
  double worst = 0, worst1p = 0;
  for (double x = -6.0; x <= 6.0; x += 0.00071) {
    const float xf = static_cast<float>(x);
    const double want = std::erf(static_cast<double>(xf));
    if (std::fabs(want) > 1e-30) worst = std::max(worst, rel(cake_erf(xf), want));
  }
  double worst1p_near0 = 0;  // where the sum is near 1 (the erfc fit's absolute error is what counts)
  for (double z = -9.0; z <= 6.0; z += 0.00071) {
    const float zf = static_cast<float>(z);
    const double want = std::erfc(-static_cast<double>(zf));
    if (want > 1e-30) worst1p = std::max(worst1p, rel(cake_erf1p(zf), want));
    if (std::fabs(z) < 0.6) worst1p_near0 = std::max(worst1p_near0, rel(cake_erf1p(zf), want));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_LT(worst1p_near0, 6e-7);
  // where 1 + erf(z) is tiny, erfc keeps it accurate; what is left is the f32 rounding of z² inside the
  // exponential (|z|² ≈ 81 has an ulp of 7.6e-6), far inside the f32 gate's 1.2e-4
  EXPECT_LT(worst1p, 1e-5);
  EXPECT_EQ(cake_erf(0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(cake_erf(std::numeric_limits<float>::quiet_NaN())));
}

TEST(SimdMath, MinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(cake_fmax(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(cake_fmax(1.0f, nan)));
  EXPECT_TRUE(std::isnan(cake_fmin(nan, 1.0f)));
  EXPECT_EQ(cake_fmax(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(cake_fmin(1.0f, 2.0f), 1.0f);
}

TEST(Prelude, HalfConversionsMatchCoreExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = cake_f16_to_f32(static_cast<uint16_t>(h)),
                b = cake::f16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(b))
      EXPECT_TRUE(std::isnan(a)) << h;
    else
      ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << h;
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 60u) << 23);  // concentrate on f16's exponent range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(cake_f32_to_f16(f), cake::f32_to_f16_bits(f)) << f;
    ASSERT_EQ(cake_f32_to_bf16(f), cake::f32_to_bf16_bits(f)) << f;
  }
  // A stride through all float bit patterns: both signs, zeros, f16 subnormals, ties, overflow, NaNs.
  for (uint64_t v = 0; v < (uint64_t{1} << 32); v += 101) {
    const auto u = static_cast<uint32_t>(v);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(cake::f16_bits_to_f32(cake_f32_to_f16(f)))) << u;
      EXPECT_TRUE(std::isnan(cake::bf16_bits_to_f32(cake_f32_to_bf16(f)))) << u;
      continue;
    }
    ASSERT_EQ(cake_f32_to_f16(f), cake::f32_to_f16_bits(f)) << u;
    ASSERT_EQ(cake_f32_to_bf16(f), cake::f32_to_bf16_bits(f)) << u;
  }
  EXPECT_EQ(cake_f32_to_f16(65519.0f), 0x7bffu);  // just below the rounding boundary to infinity
  EXPECT_EQ(cake_f32_to_f16(65520.0f), 0x7c00u);
}

TEST(Prelude, FloorDivisionAndModulo) {
  EXPECT_EQ(cake_floordiv(7, 2), 3);
  EXPECT_EQ(cake_floordiv(-7, 2), -4);
  EXPECT_EQ(cake_floordiv(7, -2), -4);
  EXPECT_EQ(cake_floordiv(-7, -2), 3);
  EXPECT_EQ(cake_floormod(-7, 2), 1);
  EXPECT_EQ(cake_floormod(7, -2), -1);
  EXPECT_EQ(cake_to_i8(300.7), 127);
  EXPECT_EQ(cake_to_i8(-3.9), -3);
  EXPECT_EQ(cake_to_i8(std::nan("")), 0);
}

}  // namespace
