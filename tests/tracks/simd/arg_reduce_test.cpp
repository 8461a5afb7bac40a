// The simd track's argmax / argmin: rows under 16 elements take one plain pass, longer rows two vectorized
// passes (the extreme value, then its first position in blocks of 64). Both must keep the contract's
// semantics on the inputs random cases never produce: ties (the first extreme wins), NaN (the first NaN wins
// over everything), infinities, and the extreme in a block's tail or the row's last element. With
// vectorize=false every row takes the plain step (the one the copy for rows of one uses), branch-free
// selects.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "build/build_service.h"
#include "build/kernel.h"
#include "contract/contract.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The contract's definition, written plainly: the first NaN, else the first extreme.
int64_t expected(const std::vector<double>& row, bool max) {
  int64_t at = 0;
  for (size_t d = 0; d < row.size(); ++d) {
    if (std::isnan(row[d])) return int64_t(d);
    if (max ? row[d] > row[size_t(at)] : row[d] < row[size_t(at)]) at = int64_t(d);
  }
  return at;
}

// Knobs: the two compute types of the two-pass search, and the plain step alone.
class ArgReduce : public ::testing::TestWithParam<const char*> {};

TEST_P(ArgReduce, TiesNaNsAndTailsKeepTheFirstIndex) {
  const CheckedContract c = load_and_check(
      (fs::path(CAKE_SOURCE_DIR) / "tests" / "tracks" / "simd" / "data" / "arg_extremes.yaml").string());
  const tracks::Artifact a = tracks::find_track("simd")->lower(
      c, target::describe_machine(), tracks::Knobs::from_json(nlohmann::json::parse(GetParam())));
  const bool two_pass = a.files.front().text.find("_hit") != std::string::npos;
  ASSERT_EQ(two_pass, std::string(GetParam()).find("vectorize") == std::string::npos)
      << "the two-pass search is generated unless vectorize=false";
  const build::BuildResult r = build::build(a);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  const build::Kernel k(r.library);

  for (const int64_t D : {1, 5, 15, 16, 64, 65, 200, 1000}) {
    // Rows: ties of the max and of the min; a NaN before, after and at the extreme; all -inf / +inf; the
    // extremes in the last element; the extremes at the start of the last block.
    std::vector<std::vector<double>> rows;
    const auto base = [&] {
      std::vector<double> row(static_cast<size_t>(D));
      for (int64_t d = 0; d < D; ++d) row[size_t(d)] = std::sin(0.7 * double(d));
      return row;
    };
    std::vector<double> v = base();
    v[size_t(D / 3)] = 5, v[size_t(D - 1)] = 5, v[size_t(D / 2)] = -5, v[size_t(D - 1) / 4 * 3] = -5;
    rows.push_back(v);
    v = base(), v[size_t(D / 2)] = kNaN, v[size_t(D - 1)] = 9;
    rows.push_back(v);
    v = base(), v[size_t(D - 1)] = kNaN, v[0] = 9;
    rows.push_back(v);
    rows.emplace_back(size_t(D), -kInf);
    rows.emplace_back(size_t(D), kInf);
    v = base(), v[size_t(D - 1)] = 7, v[size_t(D - 1) / 2] = -7;
    rows.push_back(v);
    v = base(), v[size_t((D - 1) / 64 * 64)] = 3, v[size_t(D - 1)] = -3;
    rows.push_back(v);
    v.assign(size_t(D), -1.0);  // signed zeros tie: the first of them is the maximum
    v[size_t(D > 1)] = -0.0, v[size_t(D - 1)] = 0.0;
    rows.push_back(v);

    const int64_t N = int64_t(rows.size());
    std::vector<Tensor> in, out;
    in.emplace_back(DType::f32, Shape{N, D});
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) in[0].set(n * D + d, rows[size_t(n)][size_t(d)]);
    out.emplace_back(DType::i64, Shape{N});
    out.emplace_back(DType::i64, Shape{N});
    std::vector<double> params;
    for (const SizeInfo& z : c.sizes) params.push_back(z.name == "N" ? double(N) : double(D));
    ASSERT_EQ(k.run(in, out, params), 0);
    for (int64_t n = 0; n < N; ++n) {
      EXPECT_EQ(int64_t(out[0].get(n)), expected(rows[size_t(n)], true)) << "argmax, D=" << D << " row " << n;
      EXPECT_EQ(int64_t(out[1].get(n)), expected(rows[size_t(n)], false))
          << "argmin, D=" << D << " row " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Knobs, ArgReduce,
                         ::testing::Values(R"({"compute": "f32"})", R"({"compute": "f64"})",
                                           R"({"vectorize": false})"));

}  // namespace
}  // namespace cake
