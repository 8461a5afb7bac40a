// The support code generated kernels ship with: the simd track's vectorizable f32 math (cake_math.h)
// against <cmath> in double, and the prelude's f16 / bf16 conversions and floor division against
// core's exact implementations.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

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

template <class T>
bool same(T a, T b) {  // bit for bit, or both NaN
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  return (a != a && b != b) || std::bit_cast<Bits>(a) == std::bit_cast<Bits>(b);
}

template <class T>
void expect_literal_min_max_match_general_form() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T lits[] = {-127, 127, 0, T(-0.0), T(1.5), inf, -inf};
  const T xs[] = {nan, -nan, 0, T(-0.0), inf, -inf, -128, -127, 126.5, 127, 128, T(1e30), T(-1e-40), 1.5};
  for (T k : lits) {
    for (T x : xs) {
      EXPECT_TRUE(same(cake_fmax_lit<true>(k, x), cake_fmax(k, x))) << k << " " << x;
      EXPECT_TRUE(same(cake_fmax_lit<false>(x, k), cake_fmax(x, k))) << x << " " << k;
      EXPECT_TRUE(same(cake_fmin_lit<true>(k, x), cake_fmin(k, x))) << k << " " << x;
      EXPECT_TRUE(same(cake_fmin_lit<false>(x, k), cake_fmin(x, k))) << x << " " << k;
    }
  }
}

TEST(SimdMath, MinMaxAgainstALiteralMatchTheGeneralForm) {
  expect_literal_min_max_match_general_form<float>();
  expect_literal_min_max_match_general_form<double>();
}

// The int8 cast as the TE defines it: NaN to 0, truncation toward zero, saturation.
int ref_i8(double v) {
  if (std::isnan(v)) return 0;
  return static_cast<int>(std::clamp(std::trunc(v), -128.0, 127.0));
}

TEST(SimdMath, Int8CastAgreesInEveryOperandType) {
  std::vector<double> vs = {std::nan(""),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            -0.0,
                            127.999,
                            128.0,
                            -128.5,
                            -128.0,
                            -129.0,
                            5.9999999999,
                            -5.9999999999,
                            1e300,
                            -1e300};
  for (double v = -300; v <= 300; v += 0.37) vs.push_back(v);
  for (double v : vs) {
    EXPECT_EQ(cake_to_i8(v), ref_i8(v)) << v;
    EXPECT_EQ(cake_i8(v), ref_i8(v)) << v;
    const float f = static_cast<float>(v);  // 5.9999999999 rounds to 6 here: the f32 form sees 6
    EXPECT_EQ(cake_i8(f), ref_i8(static_cast<double>(f))) << f;
  }
  for (int64_t i : {std::numeric_limits<int64_t>::min(), int64_t{-129}, int64_t{-128}, int64_t{-1},
                    int64_t{0}, int64_t{127}, int64_t{128}, std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(cake_i8(i), ref_i8(static_cast<double>(i))) << i;
  }
  EXPECT_EQ(cake_i8(true), 1);
  EXPECT_EQ(cake_to_i32(3e9), 2147483647);
  EXPECT_EQ(cake_to_i32(-3e9), -2147483647 - 1);
  EXPECT_EQ(cake_to_i32(-2.5), -2);
  EXPECT_EQ(cake_to_i32(std::nan("")), 0);
  EXPECT_EQ(cake_to_i64(1e30), std::numeric_limits<int64_t>::max() - 1023);  // the largest f64 below 2^63
  EXPECT_EQ(cake_to_i64(-1e30), std::numeric_limits<int64_t>::min());
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

// cake_keep: the value's bits under an all-ones mask, +0 under a zero mask (a short row's masked term).
TEST(CakeMath, KeepMasksToPositiveZero) {
  for (const double v : {1.5, -0.0, -3.25, std::nan(""), -std::numeric_limits<double>::infinity()}) {
    const float f = static_cast<float>(v);
    EXPECT_EQ(std::bit_cast<uint32_t>(cake_keep(f, ~uint64_t{0})), std::bit_cast<uint32_t>(f)) << v;
    EXPECT_EQ(std::bit_cast<uint64_t>(cake_keep(v, ~uint64_t{0})), std::bit_cast<uint64_t>(v)) << v;
    EXPECT_EQ(std::bit_cast<uint32_t>(cake_keep(f, 0)), 0u) << v;
    EXPECT_EQ(std::bit_cast<uint64_t>(cake_keep(v, 0)), uint64_t{0}) << v;
  }
  EXPECT_EQ(cake_keep(int64_t{-7}, ~uint64_t{0}), -7);
  EXPECT_EQ(cake_keep(int64_t{-7}, 0), 0);
}

// A NaN keeps its payload and comes out quiet (as VCVTPH2PS gives it); and no step of the conversion takes or
// makes an f32 subnormal, so a thread that flushes them (MXCSR DAZ and FTZ) converts every input the same.
TEST(Prelude, HalfToFloatKeepsNaNPayloadsAndIgnoresDenormalFlushing) {
  for (uint32_t h = 0x7c01; h < 0x8000; ++h) {
    const float a = cake_f16_to_f32(static_cast<uint16_t>(h | 0x8000u));
    EXPECT_EQ(std::bit_cast<uint32_t>(a), 0xffc00000u | (h & 0x3ffu) << 13) << h;
  }
  std::vector<uint32_t> plain(65536);
  for (uint32_t h = 0; h < 65536; ++h)
    plain[h] = std::bit_cast<uint32_t>(cake_f16_to_f32(static_cast<uint16_t>(h)));
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  std::vector<uint32_t> flushing(65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    volatile uint16_t in = static_cast<uint16_t>(h);  // converted at run time, under this MXCSR
    flushing[h] = std::bit_cast<uint32_t>(cake_f16_to_f32(in));
  }
  _mm_setcsr(csr);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(flushing[h], plain[h]) << h;
  EXPECT_EQ(std::bit_cast<float>(plain[1]), 0x1p-24f);  // the smallest subnormal, which DAZ would zero
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
