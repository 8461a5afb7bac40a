// The Halide track's f32 math (halide_math.h): coefficient tables, float reference evaluations and the
// generator-side Halide source written from the same tables.
#include "tracks/halide/halide_math.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace cake::tracks::halide {
namespace {

// erf(x) = x * P(x^2) on |x| < 1; degree 8 in x^2.
constexpr float kErfSmall[] = {1.128379226e+00f,  -3.761263788e-01f, 1.128379107e-01f,
                               -2.686613426e-02f, 5.223785061e-03f,  -8.542670403e-04f,
                               1.195694713e-04f,  -1.391170099e-05f, 1.059527563e-06f};
// erfc(x) = exp(-x^2) * t * Q(t - 5/12), t = 1 / (1 + x/2), on 1 <= x <= 10; degree 11.
constexpr float kErfcBig[] = {4.573173225e-01f,  5.974112749e-01f,  5.159978867e-01f, 1.948959678e-01f,
                              -1.199501529e-01f, -1.426840574e-01f, 5.232663453e-02f, 1.024555638e-01f,
                              -5.209558085e-02f, -7.593514025e-02f, 5.847859755e-02f, 4.316037521e-02f};
constexpr float kErfcCenter = 0.41666666f;
// tanh(x) = x + x * x^2 * T(x^2) on |x| < 0.55; degree 5.
constexpr float kTanhSmall[] = {-3.333333433e-01f, 1.333332509e-01f,  -5.396474525e-02f,
                                2.181887440e-02f,  -8.527935483e-03f, 2.528503072e-03f};
// exp: e^r = sum r^n / n!, n <= 7, after x = k ln2 + r (ln2 split in two parts for an exact k*hi).
constexpr float kExpPoly[] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};
constexpr float kLog2e = 1.44269504f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;

template <size_t N>
float horner(const float (&c)[N], float t) {
  float r = c[N - 1];
  for (size_t i = N - 1; i-- > 0;) r = r * t + c[i];
  return r;
}

// erfc for 1 <= a (a clamped to [1, 10]); exp(-a^2) split as exp(-hi^2) * exp(-(a - hi)(a + hi)), where
// hi keeps 12 mantissa bits so hi^2 is exact.
float erfc_big(float ax) {
  float a = std::fmin(std::fmax(ax, 1.0f), 10.0f);
  float t = 1.0f / (1.0f + a * 0.5f);
  float q = horner(kErfcBig, t - kErfcCenter);
  float hi = std::bit_cast<float>(std::bit_cast<uint32_t>(a) & 0xfffff000u);
  float r = (a - hi) * (a + hi);
  return exp_f32(-(hi * hi)) * exp_f32(-r) * (t * q);
}

std::string coeffs(const char* name, const float* c, size_t n) {
  std::string s = "static const float " + std::string(name) + "[] = {";
  char buf[32];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.9ef", i ? ", " : "", static_cast<double>(c[i]));
    s += buf;
  }
  return s + "};\n";
}

}  // namespace

float exp_f32(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.72f) return std::numeric_limits<float>::infinity();
  if (x < -87.33f) return 0.0f;
  float xc = std::fmin(std::fmax(x, -87.5f), 88.75f);
  float k = std::floor(xc * kLog2e + 0.5f);
  float r = xc - k * kLn2Hi;
  r = r - k * kLn2Lo;
  float p = horner(kExpPoly, r);
  // 2^k as 2^(k/2) * 2^(k - k/2): both factors stay normal for every k in [-126, 128]
  int32_t ki = static_cast<int32_t>(k), k1 = ki >> 1, k2 = ki - k1;
  float s1 = std::bit_cast<float>(static_cast<uint32_t>(k1 + 127) << 23);
  float s2 = std::bit_cast<float>(static_cast<uint32_t>(k2 + 127) << 23);
  return p * s1 * s2;
}

float erf_f32(float x) {
  float ax = std::fabs(x);
  if (ax < 1.0f) return x * horner(kErfSmall, x * x);
  return std::copysign(1.0f - erfc_big(ax), x);
}

float erfc_f32(float x) {
  float ax = std::fabs(x);
  float e = ax < 1.0f ? 1.0f - ax * horner(kErfSmall, ax * ax) : erfc_big(ax);
  return x < 0 ? 2.0f - e : e;
}

float tanh_f32(float x) {
  if (std::isnan(x)) return x;
  float ax = std::fabs(x);
  if (ax < 0.55f) {
    float t = x * x;
    return x + x * t * horner(kTanhSmall, t);
  }
  float e = exp_f32(2.0f * std::fmin(ax, 9.0f));
  return std::copysign(1.0f - 2.0f / (e + 1.0f), x);
}

std::string halide_math_source() {
  std::string s;
  s += "// ---- CAKE f32 math: vectorizable exp / erf / erfc / tanh (Halide has no erf; its exp and tanh "
       "are\n";
  s += "// scalar libm calls). Coefficients fitted for CAKE (Chebyshev, long double).\n";
  s += coeffs("kErfSmall", kErfSmall, std::size(kErfSmall));
  s += coeffs("kErfcBig", kErfcBig, std::size(kErfcBig));
  s += coeffs("kTanhSmall", kTanhSmall, std::size(kTanhSmall));
  s += coeffs("kExpPoly", kExpPoly, std::size(kExpPoly));
  s += R"(
template <size_t N>
static Expr horner(const float (&c)[N], Expr t) {
  Expr r = c[N - 1];
  for (size_t i = N - 1; i-- > 0;) r = r * t + c[i];
  return r;
}

static Expr cake_exp(Expr x) {
  x = cast<float>(x);
  Expr xc = min(max(x, -87.5f), 88.75f);
  Expr k = floor(xc * 1.44269504f + 0.5f);
  Expr r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  Expr p = horner(kExpPoly, r);
  Expr ki = cast<int32_t>(k);
  Expr k1 = ki >> 1, k2 = ki - (ki >> 1);  // 2^k = 2^k1 * 2^k2, both normal
  Expr v = p * reinterpret<float>((k1 + 127) << 23) * reinterpret<float>((k2 + 127) << 23);
  v = select(x > 88.72f, Expr(std::numeric_limits<float>::infinity()), select(x < -87.33f, 0.0f, v));
  return select(is_nan(x), x, v);
}

static Expr cake_erfc_big(Expr ax) {
  Expr a = min(max(ax, 1.0f), 10.0f);
  Expr t = 1.0f / (1.0f + a * 0.5f);
  Expr q = horner(kErfcBig, t - 0.41666666f);
  Expr hi = reinterpret<float>(reinterpret<uint32_t>(a) & cast<uint32_t>(Expr(-4096)));
  Expr r = (a - hi) * (a + hi);
  return cake_exp(-(hi * hi)) * cake_exp(-r) * (t * q);
}

static Expr cake_erf(Expr x) {
  x = cast<float>(x);
  Expr ax = abs(x);
  Expr small = x * horner(kErfSmall, x * x);
  Expr big = 1.0f - cake_erfc_big(ax);
  return select(ax < 1.0f, small, select(x < 0.0f, -big, big));
}

static Expr cake_erfc(Expr x) {
  x = cast<float>(x);
  Expr ax = abs(x);
  Expr e = select(ax < 1.0f, 1.0f - ax * horner(kErfSmall, ax * ax), cake_erfc_big(ax));
  return select(x < 0.0f, 2.0f - e, e);
}

static Expr cake_tanh(Expr x) {
  x = cast<float>(x);
  Expr ax = abs(x);
  Expr t = x * x;
  Expr small = x + x * t * horner(kTanhSmall, t);
  Expr e = cake_exp(2.0f * min(ax, 9.0f));
  Expr big = 1.0f - 2.0f / (e + 1.0f);
  Expr v = select(ax < 0.55f, small, select(x < 0.0f, -big, big));
  return select(is_nan(x), x, v);
}

static Expr cake_sigmoid(Expr x) { return 1.0f / (1.0f + cake_exp(-cast<float>(x))); }

// bf16 storage is uint16: the upper half of an f32; conversion to bf16 rounds to nearest even.
static Expr cake_bf16_to_f32(Expr u) { return reinterpret<float>(cast<uint32_t>(u) << 16); }
static Expr cake_f32_to_bf16(Expr f) {
  f = cast<float>(f);
  Expr u = reinterpret<uint32_t>(f);
  Expr r = (u + (cast<uint32_t>(0x7fff) + ((u >> 16) & cast<uint32_t>(1)))) >> 16;
  return cast<uint16_t>(select(is_nan(f), (u >> 16) | cast<uint32_t>(0x40), r));
}
// f16 storage is Halide's Float(16). Loads convert with Halide's cast (exact, NaNs kept: F16ConversionsAreExact
// reads every f16 pattern). Stores convert here, bit by bit, as the simd track's prelude does (round to
// nearest even, subnormals, infinities, quiet NaNs): Halide 14's float -> float16 cast, and any float16 select
// (widened and narrowed by the same cast), turn a NaN into an infinity.
static Expr cake_f16_to_f32(Expr h) { return cast<float>(h); }
static Expr cake_f32_to_f16(Expr f) {
  Expr u = reinterpret<uint32_t>(strict_float(cast<float>(f)));
  Expr a = u & cast<uint32_t>(0x7fffffff);
  // below 2^-14: adding 0.5 lines f16's mantissa up with the bottom of the sum's, rounded to nearest even
  Expr sub = reinterpret<uint32_t>(strict_float(reinterpret<float>(a) + 0.5f)) - cast<uint32_t>(0x3f000000);
  Expr norm = (a + cast<uint32_t>(0xfff) + ((a >> 13) & cast<uint32_t>(1)) - cast<uint32_t>(112 << 23)) >> 13;
  Expr o = select(a > cast<uint32_t>(0x7f800000), cast<uint32_t>(0x7e00),       // NaN: quiet
                  a >= cast<uint32_t>(0x477ff000), cast<uint32_t>(0x7c00),      // rounds to >= 65520: infinity
                  a < cast<uint32_t>(0x38800000), sub, norm & cast<uint32_t>(0x7fff));
  return reinterpret(Float(16), cast<uint16_t>(((u >> 16) & cast<uint32_t>(0x8000)) | o));
}
// Rounds an f32 value to bf16 / f16 precision and back (TE cast<bf16> / cast<f16> inside a computation).
static Expr cake_round_bf16(Expr f) { return cake_bf16_to_f32(cake_f32_to_bf16(f)); }
static Expr cake_round_f16(Expr f) { return cake_f16_to_f32(cake_f32_to_f16(f)); }

// max / min that propagate NaN, as the TE defines them.
static Expr cake_max(Expr a, Expr b) {
  if (!a.type().is_float()) return max(a, b);
  return select(is_nan(a), a, select(is_nan(b), b, max(a, b)));
}
static Expr cake_min(Expr a, Expr b) {
  if (!a.type().is_float()) return min(a, b);
  return select(is_nan(a), a, select(is_nan(b), b, min(a, b)));
}

// TE conversions to integers: toward zero, saturating, NaN -> 0.
static Expr cake_to_int(Expr v, Type t) {
  if (!v.type().is_float()) return saturating_cast(t, v);
  v = cast<double>(v);
  Expr lo = cast<double>(t.min()), hi = cast<double>(t.max());
  Expr c = cast(t, clamp(v, lo, hi));
  return select(is_nan(v), cast(t, 0), c);
}

// Integer floor division / modulo (Halide's are Euclidean, which differs for negative divisors).
static Expr cake_floordiv(Expr a, Expr b) {
  Expr q = a / b, r = a % b;
  return select(b < 0 && r != 0, q - 1, q);
}
static Expr cake_floormod(Expr a, Expr b) {
  Expr r = a % b;
  return select(b < 0 && r != 0, r + b, r);
}
static Expr cake_fmod(Expr a, Expr b) { return a - b * trunc(a / b); }
)";
  return s;
}

}  // namespace cake::tracks::halide
