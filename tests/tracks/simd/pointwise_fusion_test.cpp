// The simd track's fused groups of elementwise statements over all their axes (t = x + y; z = t * t - t):
// no statement has a loop of its own, so the loop over a row's points must be the vectorized one, each
// point with its own row-locals, and give the bits of the statements run apart (fusion=none), NaNs included.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

TEST(PointwiseFusion, TheLoopOverPointsIsVectorizedAndGivesTheBitsOfTheStatementsApart) {
  const std::string file = (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "add.yaml").string();
  const CheckedContract c = testing_simd::contract_with(
      file,
      {{"z[m, n] = x[m, n] + y[n]", "t[m, n] = x[m, n] + y[n]\n  z[m, n] = t[m, n] * t[m, n] - t[m, n]"}});
  std::string fused_src, apart_src;
  const build::BuildResult fused = testing_simd::lower_and_build(c, nlohmann::json::object(), &fused_src),
                           apart = testing_simd::lower_and_build(c, {{"fusion", "none"}}, &apart_src);
  ASSERT_TRUE(fused.ok() && apart.ok()) << fused.failure << apart.failure;
  ASSERT_NE(fused_src.find("fused over the leading 2 axes"), std::string::npos) << fused_src;
  // The rows shared out, the points of a row vectorized.
  EXPECT_NE(fused_src.find("#pragma omp for schedule(static)\n      for (int64_t g0 = 0; g0 < s_M; ++g0) {\n"
                           "        #pragma omp simd\n        for (int64_t g1 = 0; g1 < s_N; ++g1) {"),
            std::string::npos)
      << fused_src;
  EXPECT_NE(fused_src.find("if (s_N >= 16) {"), std::string::npos) << "shorter rows keep the plain loops";
  const build::Kernel k_fused(fused.library), k_apart(apart.library);
  for (const DType dt : c.contract.dtypes) {
    // 1 x 7 and 1 x 100: the serial copy; 37 x 1031 and 300 x 129: parallel, with a remainder past the
    // vectors; 3000 x 7: parallel, rows too short to vectorize.
    for (const auto& [m, n] :
         {std::pair<int64_t, int64_t>{1, 7}, {1, 100}, {37, 1031}, {300, 129}, {3000, 7}}) {
      const cases::Case k = cases::make_case(c, {{"M", m}, {"N", n}}, dt);
      const std::string diff = testing_simd::first_difference(k_fused, k_apart, c, k);
      EXPECT_TRUE(diff.empty()) << k.describe() << ": " << diff;
    }
  }
}

}  // namespace
}  // namespace cake
