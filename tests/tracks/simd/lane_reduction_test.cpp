// The simd track's vector-lane reductions (sum, product, max, min over the innermost variable, in f32, f64
// and i64): rows of 16 terms or more run in blocks of vector lanes, with a last block that overlaps terms
// already taken. Every term must count exactly once — the sums here are of small integers, exact in any
// order, so a term counted twice or dropped changes the result — and max / min must see a NaN wherever it
// sits (a full block, the last block's new terms) and nowhere else.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

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

// max / min as the contract defines them: NaN if any term is NaN.
double extreme(const std::vector<double>& row, size_t from, size_t to, bool max) {
  double r = max ? -kInf : kInf;
  for (size_t d = from; d < to; ++d) {
    if (std::isnan(row[d])) return kNaN;
    r = max ? std::max(r, row[d]) : std::min(r, row[d]);
  }
  return r;
}

void expect_same(double got, double want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": " << got << ", expected NaN";
  } else {
    EXPECT_EQ(got, want) << what;
  }
}

class LaneReduction : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(LaneReduction, EveryTermCountsOnceAndNaNsAreSeenWhereverTheySit) {
  const CheckedContract c = load_and_check(
      (fs::path(CAKE_SOURCE_DIR) / "tests" / "tracks" / "simd" / "data" / "row_reductions.yaml").string());
  const auto [compute, acc] = GetParam();
  const tracks::Artifact a = tracks::find_track("simd")->lower(
      c, target::describe_machine(), tracks::Knobs::from_json({{"compute", compute}, {"acc", acc}}));
  ASSERT_NE(a.files.front().text.find("cake_lanes::"), std::string::npos)
      << "the lane reduction is generated";
  const build::BuildResult r = build::build(a);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  const build::Kernel k(r.library);

  for (const int64_t D : {1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 80, 127, 1000}) {
    const auto base = [&] {  // small integers: every sum is exact in any order
      std::vector<double> row(static_cast<size_t>(D));
      for (int64_t d = 0; d < D; ++d) row[size_t(d)] = double((d * 7) % 11 - 5);
      return row;
    };
    // Rows: plain; a NaN in the first block, in the last term, and just before the last block's new terms
    // (a term the overlapping block reads again but must not take twice); the extremes at the last term;
    // all +inf; a product of ±1 and ±2 (exact).
    std::vector<std::vector<double>> rows;
    rows.push_back(base());
    for (const int64_t at : {int64_t(0), D - 1, std::max<int64_t>(0, D - 17), D / 2}) {
      std::vector<double> v = base();
      v[size_t(at)] = kNaN;
      rows.push_back(v);
    }
    std::vector<double> v = base();
    v[size_t(D - 1)] = 100, v[size_t(D - 1) / 2] = -100;
    rows.push_back(v);
    rows.emplace_back(size_t(D), kInf);
    v.assign(size_t(D), 1.0);
    for (int64_t d = 0; d < D; d += 5) v[size_t(d)] = (d / 5) % 2 ? -2.0 : 0.5;
    rows.push_back(v);

    const int64_t N = int64_t(rows.size());
    std::vector<Tensor> in, out;
    in.emplace_back(DType::f32, Shape{N, D});
    in.emplace_back(DType::i64, Shape{N, D});
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t d = 0; d < D; ++d) {
        in[0].set(n * D + d, rows[size_t(n)][size_t(d)]);
        in[1].set(n * D + d, double(((n + 3) * (d + 1) * 7919) % 2001 - 1000) * 4096.0 * 4096.0);
      }
    }
    for (int i = 0; i < 4; ++i) out.emplace_back(DType::f32, Shape{N});
    out.emplace_back(DType::f32, Shape{N, D});
    out.emplace_back(DType::i64, Shape{N});
    out.emplace_back(DType::i64, Shape{N});
    std::vector<double> params;
    for (const SizeInfo& z : c.sizes) params.push_back(z.name == "N" ? double(N) : double(D));
    ASSERT_EQ(k.run(in, out, params), 0);
    for (int64_t n = 0; n < N; ++n) {
      const std::vector<double>& row = rows[size_t(n)];
      const std::string at = "D=" + std::to_string(D) + " row " + std::to_string(n);
      double sum = 0, prod = 1;
      int64_t qs = 0, qm = std::numeric_limits<int64_t>::min();
      for (int64_t d = 0; d < D; ++d) {
        sum += row[size_t(d)], prod *= row[size_t(d)];
        const auto q = int64_t(in[1].get(n * D + d));
        qs += q, qm = std::max(qm, q);
        expect_same(out[4].get(n * D + d), sum, "running sum " + at + " j=" + std::to_string(d));
      }
      expect_same(out[0].get(n), sum, "sum " + at);
      expect_same(out[1].get(n), prod, "prod " + at);
      expect_same(out[2].get(n), extreme(row, 0, size_t(D), true), "max " + at);
      expect_same(out[3].get(n), extreme(row, 0, size_t(D), false), "min " + at);
      EXPECT_EQ(int64_t(out[5].get(n)), qs) << "i64 sum " << at;
      EXPECT_EQ(int64_t(out[6].get(n)), qm) << "i64 max " << at;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ComputeAndAccumulator, LaneReduction,
                         ::testing::Values(std::pair{"f32", "f32"}, std::pair{"f32", "f64"},
                                           std::pair{"f64", "f64"}));

}  // namespace
}  // namespace cake
