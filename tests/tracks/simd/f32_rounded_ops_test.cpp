// The simd track's rounded single operations: cast<f32>(a op b) with a and b f32 values (float inputs, or
// tensors written by a cast to a float dtype) is computed in f32 even when the kernel computes in f64,
// since f64's 53 bits are at least 2 * 24 + 2 and rounding the exact result to f64 first never changes its
// f32 rounding. The kernel must give, bit for bit, the f64 operation rounded to f32 (computed here) for
// +, -, * and /, on values across the whole f32 range: subnormals, ties, overflow to infinity, zeros,
// infinities and NaNs; and a quotient of f64 values (not f32-exact) must stay in f64. Where every rounding
// is such an operation, the kernel computes in f32 by default.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake {
namespace {

using testing_simd::lower_and_build;

CheckedContract contract_of(const std::string& compute) {
  const std::string yaml =
      "name: rounded\nlevel: 1\ndtypes: [f32]\ninputs: { a: [N], b: [N] }\noutputs: { y: [N] }\n"
      "compute: |\n" +
      compute + "cases:\n  standard: { shapes: { N: [7] } }\n";
  return check_contract(load_contract_text(yaml, "rounded.yaml"));
}

// Pairs of f32 operands: random bit patterns (every exponent), near-ties, and the special values.
std::vector<std::pair<float, float>> operands() {
  std::mt19937 rng(7);
  std::vector<std::pair<float, float>> out;
  out.reserve(40200);
  const auto any = [&] { return std::bit_cast<float>(static_cast<uint32_t>(rng())); };
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  for (int i = 0; i < 20000; ++i) out.emplace_back(any(), any());
  for (int i = 0; i < 20000; ++i) out.emplace_back(unit(rng), unit(rng));
  const float special[] = {0.0f,
                           -0.0f,
                           1.0f,
                           3.0f,
                           std::numeric_limits<float>::denorm_min(),
                           1e-38f,
                           3e38f,
                           -3e38f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (const float x : special)
    for (const float y : special) out.emplace_back(x, y);
  return out;
}

struct Form {
  const char* op;
  double (*f64)(double, double);
};

TEST(F32RoundedOps, BitIdenticalToTheF64OperationRoundedToF32) {
  const Form forms[] = {{"+", [](double x, double y) { return x + y; }},
                        {"-", [](double x, double y) { return x - y; }},
                        {"*", [](double x, double y) { return x * y; }},
                        {"/", [](double x, double y) { return x / y; }}};
  const std::vector<std::pair<float, float>> v = operands();
  const auto n = static_cast<int64_t>(v.size());
  for (const Form& form : forms) {
    const CheckedContract c = contract_of(std::string("  y[n] = cast<f32>(a[n] ") + form.op + " b[n])\n");
    std::string src;
    const build::BuildResult built = lower_and_build(c, {{"compute", "f64"}}, &src);
    ASSERT_TRUE(built.ok()) << built.failure << "\n" << built.log;
    EXPECT_NE(src.find(std::string(") ") + form.op + " (float)("), std::string::npos)
        << "the operation is emitted in f32:\n"
        << src;
    const build::Kernel k(built.library);
    const cases::Case cs = cases::make_case(c, {{"N", n}}, DType::f32);
    std::vector<Tensor> in = cases::make_inputs(c, cs), out = cases::make_outputs(c, cs);
    for (int64_t i = 0; i < n; ++i) {
      in[0].set(i, v[static_cast<size_t>(i)].first);
      in[1].set(i, v[static_cast<size_t>(i)].second);
    }
    ASSERT_EQ(k.run(in, out, cases::kernel_params(c, cs)), 0);
    for (int64_t i = 0; i < n; ++i) {
      const auto [x, y] = v[static_cast<size_t>(i)];
      const float want = static_cast<float>(form.f64(x, y));
      const auto got = static_cast<float>(out[0].get(i));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << x << " " << form.op << " " << y;
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
            << x << " " << form.op << " " << y << ": " << got << " vs " << want;
      }
    }
  }
}

TEST(F32RoundedOps, AQuotientOfF64ValuesStaysInF64) {
  // s[n] = a[n] / 3 is an f64 value held in the compute type: cast<f32>(s[n] / b[n]) must divide in f64.
  const CheckedContract c = contract_of("  s[n] = a[n] / 3\n  y[n] = cast<f32>(s[n] / b[n])\n");
  std::string src;
  const build::BuildResult built = lower_and_build(c, {{"compute", "f64"}}, &src);
  ASSERT_TRUE(built.ok()) << built.failure << "\n" << built.log;
  EXPECT_EQ(src.find(") / (float)("), std::string::npos) << src;
}

// The default compute type: f32 where every rounding is such a single operation cast to f32 (so f32 gives
// the f64 evaluation's bits), f64 where any other arithmetic rounds.
std::string default_compute(const CheckedContract& c) {
  const tracks::KnobSpec* k =
      tracks::find_track("simd")->knobs(c, target::describe_machine()).find("compute");
  return k ? k->default_value : "";
}

TEST(F32RoundedOps, ComputeDefaultsToF32WhereEachRoundingIsOneOperationCastToF32) {
  EXPECT_EQ(
      default_compute(testing_simd::contract_with(
          (std::filesystem::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "quantize_int8.yaml").string(), {})),
      "f32");
  EXPECT_EQ(default_compute(contract_of("  y[n] = cast<f32>(a[n] / 3)\n")), "f32");
  EXPECT_EQ(default_compute(contract_of("  y[n] = cast<f32>(where(a[n] > 0, a[n] * b[n], -a[n]))\n")), "f32");
  EXPECT_EQ(default_compute(contract_of("  m[n] = max(a[n], b[n])\n  y[n] = cast<f32>(m[n] - a[n])\n")),
            "f32");
  // 0.1 is not an f32 value; s[n] is an f64 quotient; two operations round twice; no cast, no f32 rounding.
  EXPECT_EQ(default_compute(contract_of("  y[n] = cast<f32>(a[n] / 0.1)\n")), "f64");
  EXPECT_EQ(default_compute(contract_of("  s[n] = a[n] / 3\n  y[n] = cast<f32>(s[n] / b[n])\n")), "f64");
  EXPECT_EQ(default_compute(contract_of("  y[n] = cast<f32>(a[n] * b[n] + 1)\n")), "f64");
  EXPECT_EQ(default_compute(contract_of("  y[n] = a[n] / b[n]\n")), "f64");
}

}  // namespace
}  // namespace cake
