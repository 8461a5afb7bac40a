// The simd track's gathers (index_select's x[ids[k], d], embedding's table[ids[b, s], d]): a data-dependent
// index that does not vary along the row is read and range-checked once per row, before the row's
// vectorized loop (a branch inside it kept GCC from vectorizing the f16 copy: 8.6 -> 1.2 ms at D = 512,
// K = 8192). An index out of range in any row, or negative, still returns CAKE_ERR_INDEX, on the unit-row
// path (D = 1), the serial copy and the parallel one, in every dtype.
#include <gtest/gtest.h>

#include <filesystem>

#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::lower_and_build;

CheckedContract load_op(const std::string& name) {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (name + ".yaml")).string());
}

TEST(Gather, TheIndexIsCheckedBeforeTheRowLoop) {
  std::string src;
  ASSERT_TRUE(lower_and_build(load_op("index_select"), nlohmann::json::object(), &src).ok());
  const size_t body = src.find("int compute(");
  const size_t rows = src.find("} else {", src.find("rows of one element", body));  // rows of D elements
  ASSERT_NE(rows, std::string::npos);
  const size_t check = src.find("CAKE_ERR_INDEX", rows), simd = src.find("#pragma omp simd", rows);
  ASSERT_NE(check, std::string::npos);
  ASSERT_NE(simd, std::string::npos);
  EXPECT_LT(check, simd) << src.substr(rows, simd - rows + 200);
}

TEST(Gather, AnIndexOutOfRangeInAnyRowIsReported) {
  for (const std::string op : {"index_select", "embedding"}) {
    const CheckedContract c = load_op(op);
    std::string src;
    const build::BuildResult r = lower_and_build(c, nlohmann::json::object(), &src);
    ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
    const build::Kernel k(r.library);
    // 7 rows: the serial copy; 20000 rows of 8: the parallel one; D = 1: the unit rows
    for (const auto& [rows, d] : {std::pair<int64_t, int64_t>{7, 1}, {7, 33}, {20000, 1}, {20000, 8}}) {
      for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
        std::map<std::string, int64_t> shape =
            op == "index_select" ? std::map<std::string, int64_t>{{"V", 13}, {"K", rows}, {"D", d}}
                                 : std::map<std::string, int64_t>{{"V", 13}, {"B", 1}, {"S", rows}, {"D", d}};
        const cases::Case kc = cases::make_case(c, shape, dt);
        std::vector<Tensor> in = cases::make_inputs(c, kc);
        const size_t ids = in[0].dtype() == DType::i64 ? 0 : 1;
        const std::vector<double> params = cases::kernel_params(c, kc);
        std::vector<Tensor> out = cases::make_outputs(c, kc);
        ASSERT_EQ(k.run(in, out, params), 0) << op << " " << kc.describe();
        for (const auto& [at, bad] : {std::pair<int64_t, int64_t>{0, 13}, {rows - 1, 13}, {rows / 2, -1}}) {
          std::vector<Tensor> bad_in = cases::make_inputs(c, kc);
          static_cast<int64_t*>(bad_in[ids].data())[at] = bad;
          EXPECT_EQ(k.run(bad_in, out, params), CAKE_ERR_INDEX)
              << op << " " << kc.describe() << ": ids[" << at << "] = " << bad;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cake
