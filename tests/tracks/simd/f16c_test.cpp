// The simd track's F16C conversions (knob f16c, cake_math.h): with them, the f16 instantiation's stores give
// core's exact f32 -> f16 rounding (cast over a sweep of f32 bit patterns) and its loads core's exact
// f16 -> f32 (add over every f16 bit pattern; reduce_sum's f64 sums and quantize_int8's max against the
// kernels without the knob), on the 16- and 8-lane vector variants and the scalar one alike (the 8-lane
// store in a cast kernel made 8 lanes wide); the vectorized
// loops do call the 16-lane variants; and the knob is on by default only where every statement is
// elementwise.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../f16_checks.h"
#include "build/kernel.h"
#include "contract/contract.h"
#include "core/dtype.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_f16::expect_stores_round_as_core;
using testing_f16::same_half;

CheckedContract bench_op(const std::string& name) {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (name + ".yaml")).string());
}

bool has_f16c() {
  return target::describe_machine().isa.avx512f;  // the knob is offered only there
}

build::BuildResult built(const CheckedContract& c, bool f16c) {
  std::string source;
  build::BuildResult r = testing_simd::lower_and_build(c, {{"f16c", f16c ? "true" : "false"}}, &source);
  EXPECT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  EXPECT_EQ(
      source.find("cake_f16c_ld") != std::string::npos || source.find("cake_f16c_st") != std::string::npos,
      f16c);
  return r;
}

// Calls to the named vector variant in the library's disassembly (objdump; -1 where it cannot run).
int vector_calls(const fs::path& library, const std::string& variant) {
  return testing_simd::disassembly_lines(library, [&](const std::string& line) {
    return line.find("call") != std::string::npos && line.find("<" + variant + ">") != std::string::npos;
  });
}

TEST(F16c, StoresRoundAsCoreDoes) {
  if (!has_f16c()) GTEST_SKIP() << "no AVX-512 here: the knob is not offered";
  const CheckedContract c = bench_op("cast");
  const build::BuildResult r = built(c, true);
  ASSERT_TRUE(r.ok());
  expect_stores_round_as_core(c, build::Kernel(r.library));
}

// No bench kernel vectorizes an f16 store eight lanes wide (GCC picks 16 even where the loop computes in
// f64), so the 8-lane store variant is reached here by cast's kernel with every simd loop made 8 lanes wide.
TEST(F16c, TheEightLaneStoreRoundsAsCoreDoes) {
  if (!has_f16c()) GTEST_SKIP() << "no AVX-512 here: the knob is not offered";
  const CheckedContract c = bench_op("cast");
  tracks::Artifact a = testing_simd::lower_simd(c, {{"f16c", "true"}});
  std::string& text = a.files.front().text;
  int loops = 0;
  for (const std::string pragma : {"#pragma omp simd", "#pragma omp parallel for simd"}) {
    for (size_t at = text.find(pragma); at != std::string::npos; at = text.find(pragma, at + 1)) {
      text.insert(at + pragma.size(), " simdlen(8)");
      ++loops;
    }
  }
  ASSERT_GT(loops, 0);
  const build::BuildResult r = build::build(a);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  const int calls = vector_calls(r.library, "_ZGVeN8v_cake_f16c_st");
  if (calls < 0) GTEST_SKIP() << "objdump did not run";
  EXPECT_GT(calls, 0);
  EXPECT_EQ(vector_calls(r.library, "_ZGVeN16v_cake_f16c_st"), 0);
  expect_stores_round_as_core(c, build::Kernel(r.library));
}

TEST(F16c, LoadsConvertEveryHalfAsCoreDoes) {
  if (!has_f16c()) GTEST_SKIP() << "no AVX-512 here: the knob is not offered";
  const CheckedContract c = bench_op("add");
  const build::BuildResult r = built(c, true);
  ASSERT_TRUE(r.ok());
  const build::Kernel k(r.library);
  // z = x + y with x every f16 bit pattern, y [N] a row of random ones; add computes f16 in f32 (f16_f32).
  const int64_t m = 64, n = 1024;
  std::mt19937 rng(3);
  std::vector<Tensor> in, out;
  in.emplace_back(DType::f16, Shape{m, n});
  in.emplace_back(DType::f16, Shape{n});
  auto* x = static_cast<uint16_t*>(in[0].data());
  auto* y = static_cast<uint16_t*>(in[1].data());
  for (int64_t i = 0; i < m * n; ++i) x[i] = static_cast<uint16_t>(i);
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<uint16_t>(rng());
  out.emplace_back(DType::f16, Shape{m, n});
  ASSERT_EQ(k.run(in, out, cases::kernel_params(c, cases::make_case(c, {{"M", m}, {"N", n}}, DType::f16))),
            0);
  const auto* z = static_cast<const uint16_t*>(out[0].data());
  for (int64_t i = 0; i < m * n; ++i) {
    const uint16_t want = f32_to_f16_bits(f16_bits_to_f32(x[i]) + f16_bits_to_f32(y[i % n]));
    ASSERT_TRUE(same_half(z[i], want))
        << "x " << x[i] << " + y " << y[i % n] << ": got " << z[i] << ", core " << want;
  }
}

// reduce_sum sums f16 in f64 (acc): its loops of eight f64 lanes call the 8-lane load variant. On
// small-integer inputs every order of reduce_sum's sums gives the same bits, and quantize_int8's max is
// exact, so with the knob both match the kernel without it bit for bit, NaNs and -infs included, in every
// dtype (the knob changes only the f16 I/O).
TEST(F16c, ReductionsMatchTheBitForms) {
  if (!has_f16c()) GTEST_SKIP() << "no AVX-512 here: the knob is not offered";
  for (const std::string op : {"reduce_sum", "quantize_int8"}) {
    const CheckedContract c = bench_op(op);
    const build::BuildResult on = built(c, true), off = built(c, false);
    ASSERT_TRUE(on.ok() && off.ok());
    const build::Kernel a(on.library), b(off.library);
    for (const DType t : {DType::f16, DType::f32, DType::bf16}) {
      for (const auto& [n, d] :
           std::array<std::pair<int64_t, int64_t>, 4>{{{1, 7}, {3, 100}, {127, 1000}, {5, 4099}}}) {
        const cases::Case k = cases::make_case(c, {{"N", n}, {"D", d}}, t);
        EXPECT_EQ(op == "reduce_sum" ? testing_simd::first_exact_difference(a, b, c, k)
                                     : testing_simd::first_difference(a, b, c, k),
                  "")
            << op;
      }
    }
  }
}

TEST(F16c, VectorizedLoopsCallTheSixteenLaneVariant) {
  if (!has_f16c()) GTEST_SKIP() << "no AVX-512 here: the knob is not offered";
  const CheckedContract c = bench_op("add");
  const build::BuildResult on = built(c, true), off = built(c, false);
  ASSERT_TRUE(on.ok() && off.ok());
  const int calls = vector_calls(on.library, "_ZGVeN16v_cake_f16c_ld");
  if (calls < 0) GTEST_SKIP() << "objdump did not run";
  EXPECT_GT(calls, 0);
  EXPECT_EQ(vector_calls(off.library, "_ZGVeN16v_cake_f16c_ld"), 0);
  // Only contracts with an f16 instantiation have the knob.
  const auto knobs = [](const std::string& op) {
    return tracks::find_track("simd")->knobs(bench_op(op), target::describe_machine());
  };
  // On by default where every statement is elementwise; offered only with an f16 instantiation.
  EXPECT_TRUE(knobs("add").defaults().boolean("f16c"));
  EXPECT_TRUE(knobs("rope").defaults().boolean("f16c"));
  EXPECT_FALSE(knobs("reduce_sum").defaults().boolean("f16c"));
  EXPECT_FALSE(knobs("argmax").defaults().boolean("f16c"));
  EXPECT_EQ(knobs("gelu").find("f16c"), nullptr);
}

}  // namespace
}  // namespace cake
