// Tests of the leave-one-out replay and the abilities plot on synthetic outcomes where the best track
// depends on contraction: the router's regret is small and below a fixed choice's.
#include <gtest/gtest.h>

#include "router/leave_one_out.h"
#include "router/plot.h"
#include "synthetic.h"

namespace cake::router {
namespace {

using testing::synthetic_outcomes;

const std::vector<std::pair<std::string, testing::ScoreRule>> kTracks{
    {"simd", [](const auto& x, double) { return 80 - 18 * x[0]; }},
    {"halide", [](const auto& x, double) { return 35 + 12 * x[0]; }},
    {"opencl", [](const auto& x, double d) { return 30 - 4 * d; }}};

TEST(LeaveOneOut, RoutingBeatsTheFixedPolicy) {
  const LeaveOneOut r = leave_one_out(synthetic_outcomes(40, kTracks));
  ASSERT_EQ(r.rows.size(), 40u);
  EXPECT_LT(r.mean_regret, 1.0);
  EXPECT_GT(r.mean_fixed_regret, 5.0);
  EXPECT_GE(r.best_chosen, 38);
  for (const LeaveOneOutRow& row : r.rows) {
    EXPECT_EQ(row.measured.size(), 3u);
    EXPECT_EQ(row.predicted.size(), 3u);
    EXPECT_EQ(row.fixed, "simd");  // the best mean score over the others
  }
}

TEST(LeaveOneOut, AnOperatorMeasuredOnOneTrackHasNoRegret) {
  auto data = synthetic_outcomes(10, kTracks);
  data.push_back(data.front());
  data.back().op = "lonely";
  data.back().track = "opencl";
  const LeaveOneOut r = leave_one_out(data);
  const auto it =
      std::find_if(r.rows.begin(), r.rows.end(), [](const auto& row) { return row.op == "lonely"; });
  ASSERT_NE(it, r.rows.end());
  EXPECT_EQ(it->chosen, "opencl");
  EXPECT_DOUBLE_EQ(it->regret(), 0);
}

TEST(Plot, AbilitiesSvgNamesEveryTrackAndParameter) {
  const std::string svg = abilities_svg(fit(synthetic_outcomes(20, kTracks)));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  for (const char* s :
       {"simd (20 outcomes)", "halide", "opencl", "contraction", "blocking", "difficulty b", "level a"})
    EXPECT_NE(svg.find(s), std::string::npos) << s;
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(abilities_svg(Model{}).find("</svg>"), std::string::npos);  // an empty model still draws
}

}  // namespace
}  // namespace cake::router
