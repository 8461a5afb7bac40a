// The simd track's bf16 instantiation in f32 (knob bf16_f32): the kernel holds a second copy of its body
// in f32 types, and the dtype dispatch sends bf16 calls, and only those, to it. A row big, small, -big
// tells the sums apart: in f32, big + small rounds back to big and the row sums to 0; in f64 it sums to
// small (2^24 and 1 in bf16 and f32; f16's largest finite value and its smallest subnormal, 2^-24).
// Where the contract sums nothing, the f16 instantiation takes that copy too (knob f16_f32): (x + y) - x
// with the same values tells f32 from f64 there.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "build/kernel.h"
#include "contract/contract.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

CheckedContract reduce_sum() {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "reduce_sum.yaml").string());
}

// A big and a small value of dtype t whose sum rounds to big in f32 and is exact in f64.
struct BigSmall {
  double big, small;
};
BigSmall big_small(DType t) {
  return t == DType::f16 ? BigSmall{65504.0, std::ldexp(1.0, -24)} : BigSmall{16777216.0, 1.0};
}

// y = sum of the row big, small, -big in dtype t by kernel k, divided by small (1: summed exactly).
double cancelling_sum(const CheckedContract& c, const build::Kernel& k, DType t) {
  const auto [big, small] = big_small(t);
  std::vector<Tensor> in, out;
  in.emplace_back(t, Shape{1, 3});
  in[0].set(0, big);
  in[0].set(1, small);
  in[0].set(2, -big);
  out.emplace_back(t, Shape{1});
  std::vector<double> params;
  for (const SizeInfo& z : c.sizes) params.push_back(z.name == "N" ? 1.0 : 3.0);
  EXPECT_EQ(k.run(in, out, params), 0);
  return out[0].get(0) / small;
}

build::Kernel lowered(const CheckedContract& c, const nlohmann::json& knobs) {
  std::string source;
  const build::BuildResult r = testing_simd::lower_and_build(c, knobs, &source);
  EXPECT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  return build::Kernel(r.library);
}

TEST(Bf16InF32, OnlyTheBf16InstantiationSumsInF32) {
  const CheckedContract c = reduce_sum();
  // Default knobs: acc=f64, bf16_f32=true.
  const build::Kernel def = lowered(c, nlohmann::json::object());
  EXPECT_EQ(cancelling_sum(c, def, DType::bf16), 0.0) << "the bf16 call ran the f32 copy";
  EXPECT_EQ(cancelling_sum(c, def, DType::f32), 1.0) << "f32 keeps its f64 sums";
  EXPECT_EQ(cancelling_sum(c, def, DType::f16), 1.0) << "f16 keeps its f64 sums";
  const build::Kernel off = lowered(c, {{"bf16_f32", "false"}});
  EXPECT_EQ(cancelling_sum(c, off, DType::bf16), 1.0) << "bf16_f32=false: bf16 sums in acc (f64)";
}

TEST(Bf16InF32, NoCopyWhenTheKernelIsInF32Already) {
  const CheckedContract c = reduce_sum();
  const auto source = [&](const nlohmann::json& knobs) {
    return testing_simd::lower_simd(c, knobs).files.front().text;
  };
  EXPECT_NE(source(nlohmann::json::object()).find("int compute_f32("), std::string::npos);
  EXPECT_EQ(source({{"compute", "f32"}, {"acc", "f32"}}).find("int compute_f32("), std::string::npos);
}

// add edited to z = (x + y) - x, run on one element in dtype t: y where the sum is exact, 0 where it rounds.
double cancelling_add(const CheckedContract& c, const build::Kernel& k, DType t) {
  const auto [big, small] = big_small(t);
  std::vector<Tensor> in, out;
  in.emplace_back(t, Shape{1, 1});
  in.emplace_back(t, Shape{1});
  in[0].set(0, big);
  in[1].set(0, small);
  out.emplace_back(t, Shape{1, 1});
  EXPECT_EQ(k.run(in, out, {1.0, 1.0}), 0);  // M, N
  return out[0].get(0) / small;
}

TEST(F16InF32, WhereNothingIsSummedTheF16InstantiationComputesInF32) {
  const CheckedContract c =
      testing_simd::contract_with((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "add.yaml").string(),
                                  {{"z[m, n] = x[m, n] + y[n]", "z[m, n] = (x[m, n] + y[n]) - x[m, n]"}});
  // Default knobs: compute=f64 (the contract rounds), bf16_f32 and f16_f32 on.
  const tracks::Artifact a = testing_simd::lower_simd(c, nlohmann::json::object());
  EXPECT_NE(a.files.front().text.find(" f16_f32=true"), std::string::npos);
  const build::Kernel def = lowered(c, nlohmann::json::object());
  EXPECT_EQ(cancelling_add(c, def, DType::f16), 0.0) << "the f16 call ran the f32 copy";
  EXPECT_EQ(cancelling_add(c, def, DType::bf16), 0.0) << "the bf16 call ran the f32 copy";
  EXPECT_EQ(cancelling_add(c, def, DType::f32), 1.0) << "f32 keeps f64";
  const build::Kernel off = lowered(c, {{"f16_f32", "false"}});
  EXPECT_EQ(cancelling_add(c, off, DType::f16), 1.0) << "f16_f32=false: f16 computes in f64";
  EXPECT_EQ(cancelling_add(c, off, DType::bf16), 0.0) << "bf16 keeps its own knob";
  // A contract that sums (reduce_sum) keeps f16 in `compute` and `acc`: no knob to turn on.
  EXPECT_EQ(
      testing_simd::lower_simd(reduce_sum(), nlohmann::json::object()).files.front().text.find(" f16_f32="),
      std::string::npos);
}

}  // namespace
}  // namespace cake
