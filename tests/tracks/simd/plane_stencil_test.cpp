// The simd track's plane stencils (knob plane): a window reduction over a statement's last two axes
// (depthwise convolution, max pooling) packs each plane of its window into phase planes and updates blocks
// of outputs held in registers, tap by tap in the reduction's order. On small-integer inputs every sum is
// exact, so a plane kernel must give the bits of its twin without plane stencils (the nest), and NaNs and
// -infs must come out alike from max pooling, over strides 1 to 3, padding as wide as the window allows,
// dilated windows, windows of two and three taps, rows of one output and rows shorter than a vector, and with
// a rest of the statement that reads along the rows. A copy of the plane kernel whose tap update is wrong
// shows which cases took the plane path.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"
#include "tracks/simd/loop_nest.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

std::string ops_file(const std::string& op) {
  return (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml")).string();
}

TEST(PlaneStencil, OnlyWindowReductionsOverTheLastTwoAxes) {
  for (const std::string op : {"depthwise_conv2d", "maxpool2d"}) {
    const CheckedContract c = load_and_check(ops_file(op));
    EXPECT_TRUE(tracks::simd::has_plane_stencil(c)) << op;
    const std::string src = testing_simd::lower_simd(c, nlohmann::json::object()).files.front().text;
    EXPECT_NE(src.find("plane stencil"), std::string::npos) << op;
    const std::string off = testing_simd::lower_simd(c, {{"plane", "false"}}).files.front().text;
    EXPECT_EQ(off.find("plane stencil"), std::string::npos) << op;
  }
  // conv2d sums over the window's channel axis too; the others have no window over two axes.
  for (const std::string op : {"conv2d", "matmul", "softmax", "rope", "cumsum", "reduce_sum"})
    EXPECT_FALSE(tracks::simd::has_plane_stencil(load_and_check(ops_file(op)))) << op;
  // A window whose row index uses the column axis is not one.
  const CheckedContract skew = testing_simd::contract_with(
      ops_file("depthwise_conv2d"),
      {{"x?[n, c, i*S + ky - P, j*S + kx - P]", "x?[n, c, i*S + j + ky - P, j*S + kx - P]"}});
  EXPECT_FALSE(tracks::simd::has_plane_stencil(skew));
}

struct Op {
  std::string name;
  testing_simd::Edits edits;  // to the bench contract
  std::string tap_update;     // a line of the plane kernel's tap loop, and a wrong version of it
  std::string wrong_update;
};

void PrintTo(const Op& op, std::ostream* os) {
  *os << op.name;
}

class PlaneStencilBits : public ::testing::TestWithParam<Op> {};

TEST_P(PlaneStencilBits, SameBitsAsTheNest) {
  const Op& op = GetParam();
  const CheckedContract c =
      testing_simd::contract_with(ops_file(op.name.substr(0, op.name.find('+'))), op.edits);
  tracks::Artifact plane = testing_simd::lower_simd(c, nlohmann::json::object());
  const tracks::Artifact nest = testing_simd::lower_simd(c, {{"plane", "false"}});
  tracks::Artifact wrong = plane;
  // Every copy of the tap loop gets the wrong update: the body and its serial copy, and the bf16 body's two
  // where bf16 computes in f32 and the others do not (not max pooling's: it rounds nothing).
  std::string& text = wrong.files.front().text;
  int copies = 0;
  for (size_t at = text.find(op.tap_update); at != std::string::npos; at = text.find(op.tap_update, at)) {
    text.replace(at, op.tap_update.size(), op.wrong_update);
    at += op.wrong_update.size();
    ++copies;
  }
  ASSERT_EQ(copies, op.name.starts_with("maxpool2d") ? 2 : 4) << op.tap_update;
  const build::BuildResult bp = build::build(plane), bn = build::build(nest), bw = build::build(wrong);
  ASSERT_TRUE(bp.ok()) << bp.failure << "\n" << bp.log;
  ASSERT_TRUE(bn.ok()) << bn.failure << "\n" << bn.log;
  ASSERT_TRUE(bw.ok()) << bw.failure << "\n" << bw.log;
  const build::Kernel kp(bp.library), kn(bn.library), kw(bw.library);

  const bool pool = op.name.starts_with("maxpool2d");
  int cases = 0, planed = 0;
  for (const DType dt : {DType::f32, DType::bf16}) {
    for (const int64_t s : {1, 2, 3}) {
      for (const auto& [kh, kw_] :
           std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {5, 2}, {2, 5}, {7, 7}, {2, 1}, {1, 3}}) {
        for (const int64_t p : {0, 1, 3}) {
          if (pool && (2 * p > kh || 2 * p > kw_)) continue;
          for (const int64_t w : {1, 9, 20}) {
            const int64_t dilation = op.name.ends_with("dilated") ? 2 : 1;
            if (w + 2 * p < kw_ * dilation || 13 + 2 * p < kh * dilation) continue;
            const int64_t channels = kh * kw_ < 4 ? 160 : 40;  // few taps take the plane from more work
            const std::map<std::string, int64_t> shape{{"N", 2},   {"C", channels}, {"H", 13}, {"W", w},
                                                       {"KH", kh}, {"KW", kw_},     {"S", s},  {"P", p}};
            const cases::Case k = cases::make_case(c, shape, dt);
            ++cases;
            const std::string exact = testing_simd::first_exact_difference(kp, kn, c, k);
            EXPECT_TRUE(exact.empty()) << exact;
            if (pool) {
              const std::string special = testing_simd::first_difference(kp, kn, c, k);
              EXPECT_TRUE(special.empty()) << special;
            }
            planed += !testing_simd::first_exact_difference(kw, kn, c, k).empty();
          }
        }
      }
    }
  }
  // Cases of one output row, of one tap, of columns of one output whose window adds columns, or with
  // little work keep the nest; the rest take the plane path.
  EXPECT_GT(planed, cases / 3) << planed << " of " << cases << " cases took the plane path";
  EXPECT_LT(planed, cases) << "some cases keep the nest";
  std::cout << planed << " of " << cases << " cases took the plane path\n";
  // Columns (W = 1, a window of one column): packed and stored down the column, with enough work to take
  // the plane path; strides 2 and 3 leave phase columns outside x and pad rows below it.
  for (const DType dt : {DType::f32, DType::bf16}) {
    for (const int64_t s : {1, 2, 3}) {
      for (const int64_t kh : {2, 3}) {
        const std::map<std::string, int64_t> shape{{"N", 1},   {"C", 256}, {"H", 200}, {"W", 1},
                                                   {"KH", kh}, {"KW", 1},  {"S", s},   {"P", 0}};
        const cases::Case k = cases::make_case(c, shape, dt);
        const std::string exact = testing_simd::first_exact_difference(kp, kn, c, k);
        EXPECT_TRUE(exact.empty()) << k.describe() << ": " << exact;
        EXPECT_FALSE(testing_simd::first_exact_difference(kw, kn, c, k).empty())
            << k.describe() << " did not take the plane path";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Windows, PlaneStencilBits,
    ::testing::Values(Op{"depthwise_conv2d", {}, "ps_a0 += ps_w * ", "ps_a0 += 2 * ps_w * "},
                      Op{"depthwise_conv2d+dilated",
                         {{"constraints:\n", "constraints:\n  - H + 2*P >= 2*KH\n  - W + 2*P >= 2*KW\n"},
                          {"Ho: (H + 2*P - KH) / S + 1", "Ho: (H + 2*P - 2*KH + 1) / S + 1"},
                          {"Wo: (W + 2*P - KW) / S + 1", "Wo: (W + 2*P - 2*KW + 1) / S + 1"},
                          {"x?[n, c, i*S + ky - P, j*S + kx - P]",
                           "x?[n, c, i*S + 2*ky - P, j*S + 2*kx - P]"}},
                         "ps_a0 += ps_w * ",
                         "ps_a0 += 2 * ps_w * "},
                      Op{"depthwise_conv2d+residual",  // the rest of the statement reads along j
                         {{"b: [C] }", "b: [C], r: [N, C, Ho, Wo] }"}, {"+ b[c]", "+ b[c] + r[n, c, i, j]"}},
                         "ps_a0 += ps_w * ",
                         "ps_a0 += 2 * ps_w * "},
                      Op{"maxpool2d",
                         {},
                         "ps_a0 = (x != x | x > ps_a0) ? x : ps_a0;",
                         "ps_a0 = (x != x | x < ps_a0) ? x : ps_a0;"}),
    [](const ::testing::TestParamInfo<Op>& i) {
      std::string name = i.param.name;
      std::replace(name.begin(), name.end(), '+', '_');
      return name;
    });

}  // namespace
}  // namespace cake
