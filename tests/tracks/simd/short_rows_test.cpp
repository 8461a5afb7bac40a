// The simd track's short rows: when every reduction of a row statement (or a fused group of them) runs
// over a size symbol of at most 16 terms, and one is an argmax or a reduction of a transcendental function
// (argmax over D = 13, cross_entropy's log-sum-exp over C = 10), each reduction is emitted as 16 terms in
// straight-line code and the row loop is vectorized across rows (at least 16 of them); terms past a row's
// end read its last element again and a sum masks them to +0. A plain sum (reduce_sum) keeps its loop. The
// same statements without vector pragmas (vectorize=false) run each row's plain loop in the same order, so
// both kernels must give bit-identical outputs, NaNs and -infs included, for every row length from 1 to 16
// (and 17, past the path), in the serial and the parallel paths, in every dtype; the vectorized kernel must
// pass the gate on the standard cases.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;

struct Op {
  std::string name;
  std::string row;   // the size symbol of the reductions, varied over 1..17
  std::string rows;  // the size symbol that counts rows, varied
  testing_simd::Edits edits = {};
};

void PrintTo(const Op& op, std::ostream* os) {
  *os << op.name;
}

class ShortRows : public ::testing::TestWithParam<Op> {};

TEST_P(ShortRows, BitIdenticalToThePlainRowLoops) {
  const Op& op = GetParam();
  const std::string file = (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op.name + ".yaml")).string();
  const CheckedContract c = testing_simd::contract_with(file, op.edits);
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, "short reductions"));
  const build::Kernel k_on(p.on.library), k_off(p.off.library);

  for (const eval::CaseOutcome& o : eval::check_kernel(k_on, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();

  // 1 and 7 rows take the serial copy; 50000 rows enter the parallel region.
  for (const int64_t n : {1, 7, 1000, 50000}) {
    for (int64_t len = 1; len <= 17; ++len) {
      if (n == 50000 && len % 4 != 1) continue;  // the parallel copy at a few lengths
      for (const DType dt : c.contract.dtypes) {
        const std::map<std::string, int64_t> shape{{op.row, len}, {op.rows, n}};
        const std::string diff = first_difference(k_on, k_off, c, cases::make_case(c, shape, dt));
        ASSERT_TRUE(diff.empty()) << diff;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    RowOps, ShortRows,
    ::testing::Values(Op{"argmax", "D", "N"}, Op{"cross_entropy", "C", "N"},
                      Op{"reduce_sum", "D", "N", {{"sum(d: x[n, d])", "sum(d: exp(x[n, d]))"}}}),
    [](const ::testing::TestParamInfo<Op>& i) {
      return i.param.name + (i.param.edits.empty() ? "" : "_exp");
    });

// A plain sum of reads keeps its loop: its straight-line terms would be gathers, slower than the loop.
TEST(ShortRowsChoice, APlainSumKeepsItsLoop) {
  const tracks::Artifact a = testing_simd::lower_simd(
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "reduce_sum.yaml").string()),
      nlohmann::json::object());
  EXPECT_EQ(a.files.front().text.find("short reductions"), std::string::npos);
}

}  // namespace
}  // namespace cake
