// Rounding of f64 to every storage dtype: f16 checked against the compiler's own _Float16
// conversion, bf16 and f16 against the nearest-even definition, integers for truncation and
// saturation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/tensor.h"

namespace cake {
namespace {

TEST(DType, NamesRoundTrip) {
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(static_cast<int>(DType::boolean), 6);  // ABI code (DESIGN §5)
  EXPECT_EQ(static_cast<int>(DType::bf16), 2);
}

// The nearest-even definition: r is representable, no representable value is nearer, and a tie
// goes to the neighbour with an even last mantissa bit.
void expect_nearest_even(double v, DType t) {
  double r = round_to_dtype(v, t);
  ASSERT_EQ(round_to_dtype(r, t), r) << "not representable: " << r;
  if (std::isinf(r)) return;
  if (r == 0.0) {  // zero: v lies within half the smallest subnormal
    double tiny = t == DType::bf16 ? std::ldexp(1.0, -133) : std::ldexp(1.0, -24);
    EXPECT_LE(std::fabs(v), tiny / 2) << v;
    return;
  }
  // Neighbours of r in t: step by one unit in the last place of t.
  double up = r, down = r;
  float rf = static_cast<float>(r);
  uint32_t bits = std::bit_cast<uint32_t>(rf);
  uint32_t ulp = t == DType::bf16 ? 1u << 16 : 0;
  if (t == DType::bf16) {
    up = std::bit_cast<float>(bits + ulp);
    down = std::bit_cast<float>(bits - ulp);
  } else {  // f16: through the bit patterns
    uint16_t h = f32_to_f16_bits(rf);
    up = f16_bits_to_f32(static_cast<uint16_t>(h + 1));
    down = f16_bits_to_f32(static_cast<uint16_t>(h - 1));
  }
  double d = std::fabs(v - r);
  EXPECT_LE(d, std::fabs(v - up)) << v;
  EXPECT_LE(d, std::fabs(v - down)) << v;
}

TEST(DType, F16MatchesTheCompiler) {
  std::mt19937_64 g(1);
  std::uniform_real_distribution<double> e(-30, 17);
  for (int i = 0; i < 200000; ++i) {
    double v = std::ldexp(1.0 + std::uniform_real_distribution<double>(0, 1)(g), static_cast<int>(e(g)));
    if (i & 1) v = -v;
    _Float16 h = static_cast<_Float16>(v);  // single rounding from double, by the compiler's runtime
    ASSERT_EQ(round_to_dtype(v, DType::f16), static_cast<double>(static_cast<float>(h))) << v;
    float f = static_cast<float>(v);
    ASSERT_EQ(f16_bits_to_f32(f32_to_f16_bits(f)), static_cast<float>(static_cast<_Float16>(f))) << f;
  }
}

TEST(DType, Bf16AndF16AreNearestEven) {
  std::mt19937_64 g(2);
  for (int i = 0; i < 100000; ++i) {
    double v = std::ldexp(std::uniform_real_distribution<double>(-2, 2)(g), static_cast<int>(g() % 60) - 30);
    expect_nearest_even(v, DType::bf16);
    expect_nearest_even(v * 1e-3, DType::f16);
  }
  // Ties: 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7 and goes to the even one (1).
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8), DType::bf16), 1.0);
  EXPECT_EQ(round_to_dtype(1.0 + 3 * std::ldexp(1.0, -8), DType::bf16), 1.0 + std::ldexp(1.0, -6));
  // Just above the tie rounds up (no double rounding through f32).
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), DType::bf16), 1.0 + std::ldexp(1.0, -7));
}

TEST(DType, OverflowUnderflowAndSpecials) {
  EXPECT_EQ(round_to_dtype(65504.0, DType::f16), 65504.0);
  EXPECT_EQ(round_to_dtype(65519.0, DType::f16), 65504.0);
  EXPECT_TRUE(std::isinf(round_to_dtype(65520.0, DType::f16)));
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -24), DType::f16), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -26), DType::f16), 0.0);
  EXPECT_TRUE(std::isnan(round_to_dtype(NAN, DType::bf16)));
  EXPECT_TRUE(std::isinf(round_to_dtype(1e39, DType::bf16)));
  EXPECT_EQ(round_to_dtype(-INFINITY, DType::f32), -INFINITY);
}

TEST(DType, IntegersTruncateAndSaturate) {
  EXPECT_EQ(round_to_dtype(2.9, DType::i32), 2);
  EXPECT_EQ(round_to_dtype(-2.9, DType::i32), -2);
  EXPECT_EQ(round_to_dtype(1e20, DType::i32), 2147483647.0);
  EXPECT_EQ(round_to_dtype(-300, DType::i8), -128);
  EXPECT_EQ(round_to_dtype(NAN, DType::i8), 0);
  EXPECT_EQ(round_to_dtype(0.2, DType::boolean), 1);
  EXPECT_EQ(round_to_dtype(0.0, DType::boolean), 0);
}

TEST(DType, BulkConversionsMatchElementwise) {
  for (DType t : kAllDTypes) {
    Tensor a(t, {1000});
    std::vector<double> src(1000), back(1000);
    std::mt19937_64 g(3);
    for (auto& v : src) v = std::uniform_real_distribution<double>(-300, 300)(g);
    store_f64(src.data(), t, a.data(), 1000);
    load_f64(a.data(), t, back.data(), 1000);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(back[static_cast<size_t>(i)], round_to_dtype(src[static_cast<size_t>(i)], t)) << dtype_name(t);
  }
}

TEST(Hash, StableAndLengthPrefixed) {
  EXPECT_EQ(hash_hex("abc"), hash_hex("abc"));
  EXPECT_NE(Hasher().add("ab").add("c").hex(), Hasher().add("a").add("bc").hex());
  EXPECT_EQ(hash_hex("abc").size(), 16u);
  // Pinned: cache keys must not change between builds or machines.
  EXPECT_EQ(hash_hex(""), Hasher().add_u64(0).hex());
}

TEST(Tensor, AbiViewAndAlignment) {
  Tensor t(DType::bf16, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  cake_tensor v = t.abi();
  EXPECT_EQ(v.dtype, 2);
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.shape[1], 5);
  EXPECT_EQ(v.stride[0], 5);
  EXPECT_EQ(v.stride[1], 1);
  EXPECT_THROW(Tensor(DType::f32, Shape(9, 1)), Error);
}

}  // namespace
}  // namespace cake
