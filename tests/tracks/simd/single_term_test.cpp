// The simd track's copy for a sum of one term: where a statement's one sum runs over a size symbol and
// the statement has an axis of its own around it (attention's scores, a sum over D per key j; its output, a
// sum over T per column d), the body has a copy for that size = 1 in which the sum's loop vanishes and the
// loop around it vectorizes. A sum of one term is that term in either copy, so the kernel must give the
// bits of the same statements without vector pragmas (vectorize=false, no copy), NaNs included, in every
// dtype; and no copy is made where the nest's unit rows already take the size, or where no loop is left.
// A contraction over one term has such a copy of its whole nest in place of its packed panels.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/precision.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

std::string ops_file(const std::string& name) {
  return (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (name + ".yaml")).string();
}

int copies(const std::string& src) {
  int n = 0;
  for (size_t at = src.find("a sum of one term"); at != std::string::npos;
       at = src.find("a sum of one term", at + 1))
    ++n;
  return n;
}

TEST(SingleTerm, AttentionWithOneTermSumsGivesTheBitsOfThePlainLoops) {
  const CheckedContract c = load_and_check(ops_file("attention"));
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, "a sum of one term"));
  // The scores (over D) and the output (over T), in compute<> and its serial copy, for f32 and the bf16
  // instantiation's f32 copy; not l (a sum with no loop of its own around it).
  EXPECT_EQ(copies(p.on_src), 8);
  const build::Kernel on(p.on.library), off(p.off.library);
  int cases = 0;
  for (const DType dt : c.contract.dtypes) {
    // D = 1 (the scores' copy), T = 1 (the output's), both (the nest's unit rows); 7 queries take the
    // serial copy, 300 the parallel region.
    for (const auto& [d, t] :
         std::vector<std::pair<int64_t, int64_t>>{{1, 64}, {1, 257}, {16, 1}, {63, 1}, {1, 1}}) {
      for (const int64_t s : {7, 300}) {
        const std::map<std::string, int64_t> shape{{"B", 1}, {"H", 2}, {"S", s}, {"T", t}, {"D", d}};
        const std::string diff = testing_simd::first_difference(on, off, c, cases::make_case(c, shape, dt));
        EXPECT_TRUE(diff.empty()) << dtype_name(dt) << " D=" << d << " T=" << t << " S=" << s << ": " << diff;
        ++cases;
      }
    }
    // Sums of two terms take the general body, whose vectorized sums may round differently: within the
    // gate of the plain loops' outputs (a copy taken for them would drop a term).
    for (const auto& [d, t] : std::vector<std::pair<int64_t, int64_t>>{{2, 64}, {16, 2}}) {
      const cases::Case k = cases::make_case(c, {{"B", 1}, {"H", 2}, {"S", 7}, {"T", t}, {"D", d}}, dt);
      const std::vector<Tensor> in = cases::make_inputs(c, k);
      std::vector<Tensor> got = cases::make_outputs(c, k), want = cases::make_outputs(c, k);
      const std::vector<double> params = cases::kernel_params(c, k);
      ASSERT_EQ(on.run(in, got, params), 0);
      ASSERT_EQ(off.run(in, want, params), 0);
      const eval::GateResult g = eval::precision_gate(got[0], want[0]);
      EXPECT_TRUE(g.pass) << k.describe() << ": " << g.str();
      ++cases;
    }
  }
  EXPECT_EQ(cases, 24);
}

// A contraction over one term (K = 1, an outer product) runs the nest with K the constant 1, vectorized
// along its last axis, instead of packed panels of one term. On small-integer inputs every product and sum
// is exact, so the nest and the plain loops (vectorize=false, packed panels) give the same bits; K = 2 takes
// the packed panels in both.
class SingleTermContraction : public ::testing::TestWithParam<std::string> {};

TEST_P(SingleTermContraction, SameBitsAsThePlainKernel) {
  const CheckedContract c = load_and_check(ops_file(GetParam()));
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, "a contraction over one term"));
  const build::Kernel on(p.on.library), off(p.off.library);
  const bool linear = GetParam() == "linear_bias_gelu";
  for (const DType dt : c.contract.dtypes) {
    for (const int64_t k : {1, 2}) {
      // rows (M, or N for linear_bias_gelu) and columns (N, or O): 1 row, a short row, a long one.
      for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 33}, {300, 127}}) {
        std::map<std::string, int64_t> shape{{"K", k}};
        shape[linear ? "N" : "M"] = m;
        shape[linear ? "O" : "N"] = n;
        if (GetParam() == "batched_matmul") shape["B"] = 3;
        const cases::Case kc = cases::make_case(c, shape, dt);
        const std::string diff = testing_simd::first_exact_difference(on, off, c, kc);
        EXPECT_TRUE(diff.empty()) << diff;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Contractions, SingleTermContraction,
                         ::testing::Values("matmul", "batched_matmul", "linear_bias_gelu"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

TEST(SingleTerm, NoCopyWhereUnitRowsTakeTheSizeOrNoLoopIsLeft) {
  // softmax's sum over D: its nest's unit rows take D = 1; cross_entropy's loss sums over N with no loop of
  // its own around the sum, and its rows' sums over C are short rows.
  for (const std::string op : {"softmax", "rms_norm", "cross_entropy", "reduce_sum"}) {
    const tracks::Artifact a =
        testing_simd::lower_simd(load_and_check(ops_file(op)), nlohmann::json::object());
    EXPECT_EQ(copies(a.files.front().text), 0) << op;
  }
}

}  // namespace
}  // namespace cake
