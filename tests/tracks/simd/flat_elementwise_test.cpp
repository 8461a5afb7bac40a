// The simd track's flat elementwise loops: a statement that reads and writes every tensor at its domain's
// own offset (gelu, silu, cast) runs as one vector loop over the flattened domain instead of a nest with a
// scalar remainder per row. A read that broadcasts (add's y[n]), permutes (permute) or is padded keeps the
// nest. On small-integer inputs every result is exact, so the flat kernel must give the bits of its twin
// whose padded read keeps the nest, over shapes whose rows leave remainders. Rows of 256 elements or more
// keep the nest (a run-time test): the flat loop was slower there.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::lower_and_build;

std::string source_of(const CheckedContract& c) {
  return testing_simd::lower_simd(c, nlohmann::json::object()).files.front().text;
}

CheckedContract bench_op(const std::string& op) {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml")).string());
}

TEST(FlatElementwise, OnlyStatementsAtTheDomainsOwnOffsetsAreFlattened) {
  for (const std::string op : {"gelu", "silu", "cast"}) {
    EXPECT_NE(source_of(bench_op(op)).find("for (int64_t flat_i = 0;"), std::string::npos) << op;
  }
  for (const std::string op : {"add", "permute", "rope", "softmax", "index_select"}) {
    EXPECT_EQ(source_of(bench_op(op)).find("flat_i"), std::string::npos) << op;
  }
}

const char* kScaled = R"(name: scaled
level: 1
dtypes: [f32, bf16, f16]
inputs:  { x: [A, B, C], w: [A, B, C] }
outputs: { y: [A, B, C] }
compute: |
  y[a, b, c] = x[a, b, c] * 3 - w[a, b, c]
cases:
  standard: { shapes: { A: [2], B: [3], C: [17] } }
)";

TEST(FlatElementwise, BitIdenticalToTheNest) {
  const CheckedContract flat = check_contract(load_contract_text(kScaled, "scaled.yaml"));
  std::string nest_yaml = kScaled;
  nest_yaml.replace(nest_yaml.find("w[a, b, c]\n"), 10, "w?[a, b, c]");
  const CheckedContract nest = check_contract(load_contract_text(nest_yaml, "scaled_nest.yaml"));
  std::string flat_src, nest_src;
  const build::BuildResult f = lower_and_build(flat, nlohmann::json::object(), &flat_src),
                           n = lower_and_build(nest, nlohmann::json::object(), &nest_src);
  ASSERT_TRUE(f.ok()) << f.failure << "\n" << f.log;
  ASSERT_TRUE(n.ok()) << n.failure << "\n" << n.log;
  EXPECT_NE(flat_src.find("flat_i"), std::string::npos);
  EXPECT_EQ(nest_src.find("flat_i"), std::string::npos) << "a padded read keeps the nest";
  const build::Kernel kf(f.library), kn(n.library);
  for (const DType t : {DType::f32, DType::bf16, DType::f16}) {
    for (const int64_t a : {1, 2}) {
      for (const int64_t b : {1, 3}) {
        for (const int64_t c : {1, 15, 17, 33, 127, 300}) {  // 300: the nest, past kFlatRowsBelow
          const cases::Case k = cases::make_case(flat, {{"A", a}, {"B", b}, {"C", c}}, t);
          const std::string diff = testing_simd::first_exact_difference(kf, kn, flat, k);
          EXPECT_TRUE(diff.empty()) << diff;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cake
