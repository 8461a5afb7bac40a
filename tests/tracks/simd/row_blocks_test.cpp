// The simd track's row blocks (knob row_block): a fused row group runs each statement over a block of rows
// before the next, and per-row scalar steps vectorize across the block. Each row's values are computed by
// the same operations in the same order as row by row, so a blocked kernel must give bit-identical
// outputs, NaNs included, at row counts below, at and past a block, and in the serial and parallel paths;
// and it must pass the gate on the standard cases.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;
using testing_simd::lower_and_build;

constexpr int kBlock = 16;

class RowBlocks : public ::testing::TestWithParam<std::string> {};

TEST_P(RowBlocks, BitIdenticalToRowByRow) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (GetParam() + ".yaml")).string());
  std::string blocked_src, rows_src;
  const build::BuildResult blocked =
                               lower_and_build(c, {{"row_block", std::to_string(kBlock)}}, &blocked_src),
                           rows = lower_and_build(c, {{"row_block", "1"}}, &rows_src);
  ASSERT_TRUE(blocked.ok()) << blocked.failure << "\n" << blocked.log;
  ASSERT_TRUE(rows.ok()) << rows.failure << "\n" << rows.log;
  ASSERT_NE(blocked_src.find("gb += " + std::to_string(kBlock)), std::string::npos)
      << "row blocks are generated";
  ASSERT_EQ(rows_src.find("gb += "), std::string::npos);
  const build::Kernel k_blocked(blocked.library), k_rows(rows.library);

  for (const eval::CaseOutcome& o : eval::check_kernel(k_blocked, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();

  // 1, 7 and 16 rows take the serial copy (a part block, one whole block); 17 and 1000 rows end in a part
  // block; 20000 rows of 33 enter the parallel region.
  for (const int64_t d : {2, 33, 127}) {
    for (const int64_t n : {1, 7, 16, 17, 1000, 20000}) {
      for (const DType dt : {DType::f32, DType::bf16}) {
        const std::string diff =
            first_difference(k_blocked, k_rows, c, cases::make_case(c, {{"D", d}, {"N", n}}, dt));
        ASSERT_TRUE(diff.empty()) << diff;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RowOps, RowBlocks,
                         ::testing::Values("softmax", "log_softmax", "rms_norm", "layer_norm",
                                           "add_rms_norm"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace cake
