// DType names and exact f64 <-> storage conversions (round to nearest even, no double rounding).
#include "core/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace cake {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i8: return "i8";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::boolean: return 1;
  }
  return 0;
}

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

namespace {

// Rounds a double to a binary float with `mant` explicit mantissa bits, smallest normal value
// min_normal (= 2^emin) and largest finite value max_finite: round to nearest even on the bits of
// the double, with gradual underflow below min_normal. Exact (a single rounding).
template <int mant>
inline double round_binary(double v, double min_normal, double max_finite) {
  if (!(std::fabs(v) >= min_normal)) {  // subnormal range, zero or NaN
    if (std::isnan(v) || v == 0.0) return v;
    const double q = min_normal * (1.0 / (1 << mant));  // the subnormal quantum
    return std::nearbyint(v / q) * q;                   // scaling by a power of two is exact
  }
  constexpr int drop = 52 - mant;
  uint64_t bits = std::bit_cast<uint64_t>(v);
  const uint64_t half = (uint64_t{1} << (drop - 1)) - 1 + ((bits >> drop) & 1);
  bits = (bits + half) & ~((uint64_t{1} << drop) - 1);  // a carry into the exponent is correct rounding
  double r = std::bit_cast<double>(bits);
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), v);
  return r;
}

constexpr double kF16MinNormal = 6.103515625e-05;          // 2^-14
constexpr double kF16Max = 65504.0;
constexpr double kBF16MinNormal = 1.1754943508222875e-38;  // 2^-126
constexpr double kBF16Max = 3.3895313892515355e38;

template <typename I>
double round_int(double v) {
  if (std::isnan(v)) return 0.0;
  double t = std::trunc(v);
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (t < lo) return lo;
  if (t > hi) return hi;
  return t;
}

}  // namespace

double round_to_dtype(double v, DType t) {
  switch (t) {
    case DType::f32: return static_cast<double>(static_cast<float>(v));  // the hardware rounds to nearest even
    case DType::f16: return round_binary<10>(v, kF16MinNormal, kF16Max);
    case DType::bf16: return round_binary<7>(v, kBF16MinNormal, kBF16Max);
    case DType::i32: return round_int<int32_t>(v);
    case DType::i64: {
      if (std::isnan(v)) return 0.0;
      double x = std::trunc(v);
      if (x <= -9.2233720368547758e18) return -9.2233720368547758e18;
      if (x >= 9.2233720368547758e18) return 9.2233720368547748e18;  // largest double below 2^63
      return x;
    }
    case DType::i8: return round_int<int8_t>(v);
    case DType::boolean: return v != 0.0 ? 1.0 : 0.0;
  }
  return v;
}

uint16_t f32_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  double r = round_to_dtype(static_cast<double>(f), DType::f16);
  double a = std::fabs(r);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a == 0.0) return sign;
  int e;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp16 = e - 1 + 15;
  if (exp16 <= 0) {  // subnormal: a = k * 2^-24
    uint16_t k = static_cast<uint16_t>(std::ldexp(a, 24));
    return static_cast<uint16_t>(sign | k);
  }
  uint16_t frac = static_cast<uint16_t>(std::ldexp(m * 2.0 - 1.0, 10));
  return static_cast<uint16_t>(sign | (exp16 << 10) | frac);
}

float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t frac = h & 0x3ffu;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(frac), -24);
  } else if (exp == 31) {
    mag = frac ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    mag = std::ldexp(static_cast<float>(frac | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -mag : mag;
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_bits_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

double load_as_f64(const void* p, DType t) {
  switch (t) {
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::f16: { uint16_t v; std::memcpy(&v, p, 2); return f16_bits_to_f32(v); }
    case DType::bf16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_f32(v); }
    case DType::i32: { int32_t v; std::memcpy(&v, p, 4); return static_cast<double>(v); }
    case DType::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::i8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case DType::boolean: { uint8_t v; std::memcpy(&v, p, 1); return v ? 1.0 : 0.0; }
  }
  return 0.0;
}

void store_from_f64(void* p, DType t, double v) {
  double r = round_to_dtype(v, t);
  switch (t) {
    case DType::f32: { float f = static_cast<float>(r); std::memcpy(p, &f, 4); return; }
    case DType::f16: { uint16_t h = f32_to_f16_bits(static_cast<float>(r)); std::memcpy(p, &h, 2); return; }
    case DType::bf16: {
      // r is exactly representable in bf16, hence in f32: truncating the f32 bits is exact.
      uint16_t b = static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(r)) >> 16);
      if (std::isnan(r)) b = 0x7fc0u;
      std::memcpy(p, &b, 2);
      return;
    }
    case DType::i32: { int32_t i = static_cast<int32_t>(r); std::memcpy(p, &i, 4); return; }
    case DType::i64: { int64_t i = static_cast<int64_t>(r); std::memcpy(p, &i, 8); return; }
    case DType::i8: { int8_t i = static_cast<int8_t>(r); std::memcpy(p, &i, 1); return; }
    case DType::boolean: { uint8_t b = r != 0.0; std::memcpy(p, &b, 1); return; }
  }
}

void load_f64(const void* src, DType t, double* dst, int64_t n) {
  switch (t) {
    case DType::f32: {
      const float* p = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = p[i];
      return;
    }
    case DType::bf16: {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_bits_to_f32(p[i]);
      return;
    }
    default: {
      const char* p = static_cast<const char*>(src);
      const size_t es = dtype_size(t);
      for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f64(p + i * es, t);
    }
  }
}

void store_f64(const double* src, DType t, void* dst, int64_t n) {
  switch (t) {
    case DType::f32: {
      float* p = static_cast<float*>(dst);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(src[i]);
      return;
    }
    case DType::bf16: {
      uint16_t* p = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        double r = round_binary<7>(src[i], kBF16MinNormal, kBF16Max);  // exact in f32: truncation is exact
        p[i] = std::isnan(r) ? uint16_t{0x7fc0} : static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(r)) >> 16);
      }
      return;
    }
    default: {
      char* p = static_cast<char*>(dst);
      const size_t es = dtype_size(t);
      for (int64_t i = 0; i < n; ++i) store_from_f64(p + i * es, t, src[i]);
    }
  }
}

}  // namespace cake
