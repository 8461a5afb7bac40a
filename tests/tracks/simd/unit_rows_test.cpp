// The simd track's inner sizes of 1: when the size symbols of every inner extent of a row nest are 1
// (softmax over D = 1, an embedding of width 1, rope's rows of 2·E with E = 1), the nest runs as
// straight-line rows of a constant length under `omp for simd`, vectorized across rows. The same statements
// without vector pragmas (vectorize=false) compute each row's elements in the same order, so both kernels
// must give bit-identical outputs, NaNs included, in the serial and the parallel paths, in every dtype of
// the contract; and the vectorized kernel must pass the gate on the standard cases.
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
#include "tracks/track.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;

struct Op {
  std::string name;
  std::string row;                       // the size symbol set to 1 (the rows are 1 or 2·1 long)
  std::map<std::string, int64_t> other;  // the other sizes but the row count
  std::string rows;                      // the size symbol that counts rows, varied
};

void PrintTo(const Op& op, std::ostream* os) {
  *os << op.name;
}

class UnitRows : public ::testing::TestWithParam<Op> {};

TEST_P(UnitRows, BitIdenticalToTheUnvectorizedRows) {
  const Op& op = GetParam();
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op.name + ".yaml")).string());
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, "inner sizes of 1"));
  // Rows of a constant multiple of the size (rope's 2·E) unroll whole in the copy; rows of one need not.
  EXPECT_EQ(p.on_src.find("#pragma GCC unroll 16") != std::string::npos, op.name == "rope");
  const build::Kernel k_on(p.on.library), k_off(p.off.library);

  for (const eval::CaseOutcome& o : eval::check_kernel(k_on, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();

  // 1 and 7 rows take the serial copy; 50000 rows enter the parallel region.
  for (const int64_t n : {1, 7, 1000, 50000}) {
    for (const DType dt : c.contract.dtypes) {
      std::map<std::string, int64_t> shape = op.other;
      shape[op.row] = 1, shape[op.rows] = n;
      const std::string diff = first_difference(k_on, k_off, c, cases::make_case(c, shape, dt));
      ASSERT_TRUE(diff.empty()) << diff;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RowOps, UnitRows,
                         ::testing::Values(Op{"softmax", "D", {}, "N"}, Op{"log_softmax", "D", {}, "N"},
                                           Op{"rms_norm", "D", {}, "N"}, Op{"layer_norm", "D", {}, "N"},
                                           Op{"add_rms_norm", "D", {}, "N"},
                                           Op{"embedding", "D", {{"B", 2}, {"V", 9}}, "S"},
                                           Op{"rope", "E", {{"B", 2}, {"H", 3}}, "S"}),
                         [](const ::testing::TestParamInfo<Op>& i) { return i.param.name; });

}  // namespace
}  // namespace cake
