// The precision gate just inside and just outside each threshold, for every dtype class.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/precision.h"

namespace cake {
namespace {

Tensor filled(DType t, int64_t n, double v) {
  Tensor x(t, {n});
  for (int64_t i = 0; i < n; ++i) x.set(i, v);
  return x;
}

class FloatGate : public ::testing::TestWithParam<DType> {};

TEST_P(FloatGate, MareThreshold) {
  DType t = GetParam();
  double T = eval::precision_threshold(t);
  // One element off by just under / just over 10 T, the rest exact (MERE stays tiny).
  const int64_t n = 100000;
  Tensor want = filled(t, n, 1.0);
  Tensor got = filled(t, n, 1.0);
  // Representable values in t near 1 + 10T: step by the dtype's ulp at 1 (T is 2^-13, 2^-10, 2^-7;
  // ulps at 1 are 2^-23, 2^-10, 2^-7).
  double ulp = t == DType::f32 ? std::ldexp(1.0, -23) : t == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
  double inside = 1.0 + std::floor(10 * T / ulp - 1) * ulp, outside = 1.0 + std::ceil(10 * T / ulp + 1e-9) * ulp;
  got.set(7, inside);
  EXPECT_TRUE(eval::precision_gate(got, want).pass) << eval::precision_gate(got, want).str();
  got.set(7, outside);
  auto r = eval::precision_gate(got, want);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.reason, "mare");
  EXPECT_EQ(r.worst, 7);
}

TEST_P(FloatGate, MereThreshold) {
  DType t = GetParam();
  double T = eval::precision_threshold(t);
  // 1 + 2T is exact in every float dtype. A fraction f of elements off by 2T (under 10 T, so MARE
  // passes): MERE = 2 f T, under T for f = 0.45, over for f = 0.55.
  for (double f : {0.45, 0.55}) {
    const int64_t n = 1000;
    Tensor want = filled(t, n, 1.0), got = filled(t, n, 1.0);
    for (int64_t i = 0; i < static_cast<int64_t>(f * n); ++i) got.set(i, 1.0 + 2 * T);
    auto r = eval::precision_gate(got, want);
    EXPECT_NEAR(r.mere, 2 * f * T, 1e-6 * T);
    EXPECT_EQ(r.pass, f < 0.5) << r.str();
    if (!r.pass) EXPECT_EQ(r.reason, "mere");
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, FloatGate, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Precision, NearZeroUsesAbsoluteError) {
  Tensor want = filled(DType::f32, 10, 0.0), got = filled(DType::f32, 10, 0.0);
  got.set(3, 5e-5);  // relative error would be 500; absolute 5e-5 < 10 T = 1.2e-3
  EXPECT_TRUE(eval::precision_gate(got, want).pass);
  got.set(3, 2e-3);
  EXPECT_FALSE(eval::precision_gate(got, want).pass);
}

TEST(Precision, IntegersAndBoolMustMatchExactly) {
  for (DType t : {DType::i32, DType::i64, DType::i8, DType::boolean}) {
    Tensor want = filled(t, 50, 1), got = filled(t, 50, 1);
    EXPECT_TRUE(eval::precision_gate(got, want).pass);
    got.set(49, 0);
    auto r = eval::precision_gate(got, want);
    EXPECT_FALSE(r.pass) << dtype_name(t);
    EXPECT_EQ(r.reason, "exact");
    EXPECT_EQ(r.mismatches, 1);
  }
}

TEST(Precision, NanPositionsMustMatch) {
  Tensor want = filled(DType::f32, 4, 1.0), got = filled(DType::f32, 4, 1.0);
  want.set(2, NAN);
  got.set(2, NAN);
  EXPECT_TRUE(eval::precision_gate(got, want).pass);
  got.set(2, 1.0);
  EXPECT_EQ(eval::precision_gate(got, want).reason, "nan-position");
  got.set(2, NAN);
  got.set(1, NAN);
  EXPECT_EQ(eval::precision_gate(got, want).reason, "nan-position");
}

TEST(Precision, ShapeAndDtypeMismatchFail) {
  EXPECT_EQ(eval::precision_gate(Tensor(DType::f32, {3}), Tensor(DType::f32, {4})).reason, "shape");
  EXPECT_EQ(eval::precision_gate(Tensor(DType::f16, {3}), Tensor(DType::f32, {3})).reason, "dtype");
}

}  // namespace
}  // namespace cake
