// Element types of CAKE tensors, their ABI codes (DESIGN §5), names, sizes and the
// round-to-nearest-even conversions between f64 and every storage type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cake {

// The numeric codes are part of the kernel C ABI: never renumber.
enum class DType : int32_t { f32 = 0, f16 = 1, bf16 = 2, i32 = 3, i64 = 4, i8 = 5, boolean = 6 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32,
                                       DType::i64, DType::i8,  DType::boolean};

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
size_t dtype_size(DType t);
bool is_float(DType t);
inline bool is_integer(DType t) { return !is_float(t); }

// IEEE binary16 / bfloat16 bit patterns from float, rounding to nearest even (NaN stays NaN).
uint16_t f32_to_f16_bits(float f);
float f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float bf16_bits_to_f32(uint16_t b);

// Rounds v to the nearest value representable in t (integers: toward zero, saturating, NaN -> 0;
// bool: v != 0). Floats round to nearest even, directly from f64 (no double rounding).
double round_to_dtype(double v, DType t);

// Reads / writes one element of storage type t at p as f64 (writing rounds as round_to_dtype).
double load_as_f64(const void* p, DType t);
void store_from_f64(void* p, DType t, double v);

// Bulk forms of the two above over n contiguous elements.
void load_f64(const void* src, DType t, double* dst, int64_t n);
void store_f64(const double* src, DType t, void* dst, int64_t n);

}  // namespace cake
