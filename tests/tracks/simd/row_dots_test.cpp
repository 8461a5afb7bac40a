// The simd track's row dot products: a sum along d of a vector free of the innermost axis j and a row
// picked by j, both plain reads with d as their last index (attention's scores), runs as dot products of
// contiguous rows, several j at a time (cake_gemm::dot_rows), instead of a reduction loop per output; sums
// of fewer than 8 terms, and a padded read, keep the loop. On small-integer inputs every sum is exact, so
// the row dots must give the bits of their padded twin over rows of 1 to 13 outputs (remainders of the
// six-row groups) and sums of 1 to 67 terms (both sides of the threshold, remainders of the vector width)
// in three dtypes. Where the CPU has AVX512-BF16, bf16 rows take the bf16 dot product (knob bf16_dot),
// exact on these inputs too; the rows' horizontal sums are folded together (cake_gemm::sum_lanes_of_rows),
// so a row sum landing in another row's output fails the bits.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"
#include "target/machine.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::lower_and_build;

const char* kScores = R"(name: scores
level: 2
dtypes: [f32, bf16, f16]
inputs:  { q: [B, S, D], k: [B, T, D] }
outputs: { y: [B, S, T] }
compute: |
  y[b, i, j] = sum(d: q[b, i, d] * k[b, j, d]) * 2 + 1
cases:
  standard: { shapes: { B: [2], S: [3], T: [7], D: [17] } }
)";

TEST(RowDots, AttentionsScoresAreRowDots) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "attention.yaml").string());
  const std::string src = testing_simd::lower_simd(c, nlohmann::json::object()).files.front().text;
  EXPECT_NE(src.find("cake_gemm::dot_rows<R"), std::string::npos);
}

TEST(RowDots, BitIdenticalToTheReductionLoop) {
  // gemm off: the contraction skeleton would take this statement whole.
  const nlohmann::json knobs{{"gemm", "false"}};
  const CheckedContract dots = check_contract(load_contract_text(kScores, "scores.yaml"));
  std::string loop_yaml = kScores;
  loop_yaml.replace(loop_yaml.find("k[b, j, d]"), 10, "k?[b, j, d]");
  const CheckedContract loop = check_contract(load_contract_text(loop_yaml, "scores_loop.yaml"));
  std::string dots_src, loop_src;
  const build::BuildResult a = lower_and_build(dots, knobs, &dots_src),
                           b = lower_and_build(loop, knobs, &loop_src);
  ASSERT_TRUE(a.ok()) << a.failure << "\n" << a.log;
  ASSERT_TRUE(b.ok()) << b.failure << "\n" << b.log;
  EXPECT_NE(dots_src.find("rd_rows"), std::string::npos);
  EXPECT_EQ(loop_src.find("rd_rows"), std::string::npos) << "a padded read keeps the loop";
  EXPECT_EQ(dots_src.find("dot_rows_bf16") != std::string::npos, target::describe_machine().isa.avx512bf16)
      << "bf16 rows go to the bf16 dot product where the CPU has it";
  const build::Kernel ka(a.library), kb(b.library);
  for (const DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (const int64_t rows : {1, 5, 6, 7, 13}) {
      for (const int64_t d : {1, 5, 8, 17, 64, 67}) {
        const cases::Case k = cases::make_case(dots, {{"B", 2}, {"S", 3}, {"T", rows}, {"D", d}}, t);
        const std::string diff = testing_simd::first_exact_difference(ka, kb, dots, k);
        EXPECT_TRUE(diff.empty()) << diff;
      }
    }
  }
}

}  // namespace
}  // namespace cake
