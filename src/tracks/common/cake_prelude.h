/* Support code shipped with every CAKE-generated CPU kernel (written into the build directory as
   cake_prelude.h): floor division as the TE defines it, f16 / bf16 conversions with round-to-nearest-even,
   saturating integer casts with NaN → 0, and the dense-tensor check of the ABI prologue. C and C++. */
#ifndef CAKE_PRELUDE_H
#define CAKE_PRELUDE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cake_kernel_abi.h"

static inline int64_t cake_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
static inline int64_t cake_floormod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}
static inline int64_t cake_min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}
static inline int64_t cake_max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

static inline float cake_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t cake_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
/* The f16 conversions are branch-free (selects only), so a loop of them vectorizes (f16 D=512 K=8192
   index_select: 1.7 -> 1.1 ms). Every non-NaN value converts to the bits core's f16_bits_to_f32 gives; a NaN
   keeps its payload and comes out quiet, as F16C's VCVTPH2PS gives it. No step takes or makes an f32
   subnormal, so a thread that flushes them (MXCSR DAZ / FTZ) converts the same. */
static inline float cake_f16_to_f32(uint16_t h) {
  const int32_t s = (int16_t)h; /* sign-extended: the sign lands in bit 31 */
  const uint32_t em = (uint32_t)s & 0x7fffu;
  /* normal: the exponent rebiased by 224 then scaled by 2^-112, exact; exponent 31 becomes 255 (infinity,
     NaN). Subnormal (em < 0x400): 0.5 + em * 2^-24 is exact in f32, less 0.5 it is the value. In cache,
     a vectorized sum of conversions: 0.10 -> 0.063 ns per element against a selection among three forms. */
  uint32_t u, v;
  const uint32_t nb = (em << 13) + (224u << 23), sb = em | (126u << 23);
  float norm, sub;
  memcpy(&norm, &nb, 4);
  memcpy(&sub, &sb, 4);
  norm *= 0x1p-112f;
  sub -= 0.5f;
  memcpy(&u, &norm, 4);
  memcpy(&v, &sub, 4);
  u = em < 0x0400u ? v : u;
  u |= (uint32_t)s & 0x80000000u;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t cake_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t a = u & 0x7fffffffu;
  /* below 2^-14 (an f16 subnormal or zero): adding 0.5 lines the f16 mantissa up with the bottom of the sum's
     and rounds it to nearest even */
  float af, sum;
  memcpy(&af, &a, 4);
  sum = af + 0.5f;
  uint32_t sub;
  memcpy(&sub, &sum, 4);
  /* The result is built in the top 16 bits and shifted down once: GCC 12 narrows a chain of selects that
     ends in a 16-bit value to 16-bit lanes and then gives up vectorizing it (f32 -> f16 cast, in cache: 1.09
     -> 0.18 ns per element), which a result in the top half keeps it from doing. Bit-identical over all 2^32
     inputs to the masks this replaced (0.12 -> 0.11 ns per element). */
  /* normal: rounded to nearest even */
  uint32_t o = ((a + 0xfffu + ((a >> 13) & 1u) - (112u << 23)) << 3) & 0xffff0000u;
  o = a < 0x38800000u ? (sub - 0x3f000000u) << 16 : o;
  o = a >= 0x477ff000u ? 0x7c000000u : o; /* rounds to >= 65520: infinity */
  o = a > 0x7f800000u ? 0x7e000000u : o;  /* NaN: quiet */
  return (uint16_t)(((u & 0x80000000u) | o) >> 16);
}

/* v with NaN as 0, clamped to [lo, hi]. The integer casts convert this, truncating toward zero: with integer
   bounds, clamping before the truncation equals clamping after, and three selects vectorize where a
   branch on NaN and a trunc() call in between did not. */
static inline double cake_sat(double v, double lo, double hi) {
  double t = v != v ? 0.0 : v;
  t = t < lo ? lo : t;
  return t > hi ? hi : t;
}
static inline int8_t cake_to_i8(double v) {
  return (int8_t)(int32_t)cake_sat(v, -128.0, 127.0);
}
static inline int32_t cake_to_i32(double v) {
  return (int32_t)cake_sat(v, -2147483648.0, 2147483647.0);
}
static inline int64_t cake_to_i64(double v) {
  return (int64_t)cake_sat(v, -9.2233720368547758e18, 9.2233720368547748e18);
}

/* 0 when t is a dense row-major tensor of this dtype, rank and shape; a CAKE_ERR_* code otherwise. */
static inline int cake_check_tensor(const cake_tensor* t, int32_t dtype, int rank, const int64_t* shape) {
  if (t->dtype != dtype) return CAKE_ERR_DTYPE;
  if (t->rank != rank) return CAKE_ERR_SHAPE;
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (t->shape[i] != shape[i]) return CAKE_ERR_SHAPE;
    if (shape[i] > 1 && t->stride[i] != st) return CAKE_ERR_LAYOUT;
    st *= shape[i];
  }
  if (st > 0 && t->data == 0) return CAKE_ERR_ARGS;
  return CAKE_OK;
}

#endif /* CAKE_PRELUDE_H */
