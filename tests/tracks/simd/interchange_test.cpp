// The simd track's reduction interchange (knob interchange): a stencil reduction runs outside the innermost
// axis as vectorized updates of a row of accumulators, split into an interior with unguarded reads (with
// copies for strides 1 and 2) and guarded borders. Each output's terms are combined in the same order as in
// the reduction-innermost nest, so both nests must give bit-identical outputs, NaNs included, on the standard
// cases and on shapes chosen for their borders (padding wider than the window, strides of 3, rows that are
// all border), and, where no read is padded along the row, with its blocks held in registers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"
#include "target/machine.h"
#include "tracks/simd/loop_nest.h"
#include "tracks/track.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::lower_and_build;
using testing_simd::same_bits;

struct Op {
  std::string name;
  std::vector<std::map<std::string, int64_t>> border_shapes;
};

void PrintTo(const Op& op, std::ostream* os) {
  *os << op.name;
}

class Interchange : public ::testing::TestWithParam<Op> {};

TEST_P(Interchange, BitIdenticalToTheReductionInnermostNest) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (GetParam().name + ".yaml")).string());
  std::string on_src, off_src;
  // (conv2d's contraction skeleton off: it takes the cases with 4 output channels or more; plane stencils
  // off: they take the depthwise and pooling cases with enough taps and rows.)
  nlohmann::json on_knobs{{"interchange", "true"}, {"gemm", "false"}},
      off_knobs{{"interchange", "false"}, {"gemm", "false"}};
  if (tracks::simd::has_plane_stencil(c)) on_knobs["plane"] = off_knobs["plane"] = "false";
  const build::BuildResult on = lower_and_build(c, on_knobs, &on_src),
                           off = lower_and_build(c, off_knobs, &off_src);
  ASSERT_TRUE(on.ok()) << on.failure << "\n" << on.log;
  ASSERT_TRUE(off.ok()) << off.failure << "\n" << off.log;
  ASSERT_NE(on_src.find("int64_t lo = 0, hi = "), std::string::npos) << "the interior split is generated";
  ASSERT_NE(on_src.find("const int64_t s_S = 2;"), std::string::npos) << "stride 2 has its own copy";
  ASSERT_EQ(off_src.find("int64_t lo = 0, hi = "), std::string::npos);
  const build::Kernel k_on(on.library), k_off(off.library);

  // The interchanged kernel against the reference.
  for (const eval::CaseOutcome& o : eval::check_kernel(k_on, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();

  std::vector<cases::Case> all = cases::make_cases(c, cases::Set::Standard);
  for (const auto& shape : GetParam().border_shapes)
    for (const DType dt : {DType::f32, DType::bf16}) all.push_back(cases::make_case(c, shape, dt));
  int rows_at_least_16 = 0;
  for (const cases::Case& k : all) {
    std::vector<Tensor> in = cases::make_inputs(c, k);
    for (int64_t i = 5; i < in[0].numel(); i += 1009) in[0].set(i, std::nan(""));  // NaNs must propagate
    std::vector<Tensor> out_on = cases::make_outputs(c, k), out_off = cases::make_outputs(c, k);
    const std::vector<double> params = cases::kernel_params(c, k);
    ASSERT_EQ(k_on.run(in, out_on, params), 0) << k.describe();
    ASSERT_EQ(k_off.run(in, out_off, params), 0) << k.describe();
    const Tensor &a = out_on[0], &b = out_off[0];
    const Shape& shape = a.shape();
    rows_at_least_16 += shape.back() >= 16;
    for (int64_t i = 0; i < a.numel(); ++i) {
      ASSERT_TRUE(same_bits(a, b, i))
          << k.describe() << " element " << i << ": " << a.get(i) << " vs " << b.get(i);
    }
  }
  EXPECT_GT(rows_at_least_16, 2) << "cases that take the interchanged nest";
}

INSTANTIATE_TEST_SUITE_P(
    Stencils, Interchange,
    ::testing::Values(
        Op{"maxpool2d",
           {{{"N", 1}, {"C", 2}, {"H", 9}, {"W", 50}, {"KH", 5}, {"KW", 5}, {"S", 3}, {"P", 2}},
            {{"N", 1}, {"C", 3}, {"H", 4}, {"W", 17}, {"KH", 2}, {"KW", 2}, {"S", 1}, {"P", 1}}}},
        Op{"depthwise_conv2d",
           {{{"N", 1}, {"C", 2}, {"H", 9}, {"W", 40}, {"KH", 7}, {"KW", 7}, {"S", 3}, {"P", 3}},
            {{"N", 1}, {"C", 3}, {"H", 5}, {"W", 33}, {"KH", 2}, {"KW", 1}, {"S", 1}, {"P", 3}}}},
        Op{"conv2d",
           {{{"N", 1}, {"C", 2}, {"O", 3}, {"H", 6}, {"W", 45}, {"KH", 3}, {"KW", 5}, {"S", 2}, {"P", 2}},
            {{"N", 1}, {"C", 1}, {"O", 2}, {"H", 3}, {"W", 20}, {"KH", 1}, {"KW", 2}, {"S", 1}, {"P", 3}}}}),
    [](const ::testing::TestParamInfo<Op>& i) { return i.param.name; });

// Without padded reads along the row, the interchanged row runs in blocks of four vectors, then of one,
// held in registers over the reduction, and the rest as before: a sum (matrix times matrix, i-k-j) and a
// max over an unpadded window, over rows that leave each kind of remainder, in three dtypes, NaNs
// included.
TEST(Interchange, RowBlocksGiveTheBitsOfTheReductionInnermostNest) {
  const std::string yaml = R"(name: blocks
level: 2
dtypes: [f32, bf16, f16]
inputs:  { p: [I, T], v: [T, D], x: [I, E] }
outputs: { o: [I, D], m: [I, F] }
sizes:
  E: F + 2
compute: |
  o[i, d] = sum(j: p[i, j] * v[j, d]) * 3
  m[i, f] = max(k in 0..3: x[i, f + k])
cases:
  standard: { shapes: { I: [3], T: [5], D: [40], F: [41] } }
)";
  const CheckedContract c = check_contract(load_contract_text(yaml, "blocks.yaml"));
  std::string on_src, off_src;
  const build::BuildResult on = lower_and_build(c, {{"interchange", "true"}, {"gemm", "false"}}, &on_src),
                           off = lower_and_build(c, {{"interchange", "false"}, {"gemm", "false"}}, &off_src);
  ASSERT_TRUE(on.ok()) << on.failure << "\n" << on.log;
  ASSERT_TRUE(off.ok()) << off.failure << "\n" << off.log;
  EXPECT_NE(on_src.find("blk[l] += x;"), std::string::npos);
  EXPECT_NE(on_src.find("blk[l] = x != x"), std::string::npos);
  const build::Kernel k_on(on.library), k_off(off.library);
  for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (const int64_t d : {16, 17, 31, 32, 40, 64, 70, 100, 131}) {
      const cases::Case k = cases::make_case(c, {{"I", 3}, {"T", 5}, {"D", d}, {"F", d + 1}}, dt);
      EXPECT_EQ(testing_simd::first_difference(k_on, k_off, c, k), "");
      EXPECT_EQ(testing_simd::first_exact_difference(k_on, k_off, c, k), "");
    }
  }
}

}  // namespace
}  // namespace cake
