// Tests of the decision: the chosen track and the deciding feature follow the outcomes, the router
// abstains with every reason when no track is feasible, and an unmeasured track is explored.
#include <gtest/gtest.h>

#include "router/decide.h"
#include "synthetic.h"

namespace cake::router {
namespace {

using testing::profile_with;
using testing::synthetic_outcomes;

TEST(Decide, DecidingFeatureIsTheOneTheOutcomesDependOn) {
  for (int k = 0; k < kNumFeatures; ++k) {
    const Model m =
        fit(synthetic_outcomes(64, {{"rising", [k](const auto& x, double) { return 30 + 15 * x[k]; }},
                                    {"falling", [k](const auto& x, double) { return 75 - 15 * x[k]; }}}));
    const std::vector<Gate> both{{"rising", true, ""}, {"falling", true, ""}};
    const Decision hi = decide(m, profile_with(k, 3), both);
    EXPECT_EQ(hi.chosen, "rising") << profile::feature_name(k);
    EXPECT_EQ(hi.runner_up, "falling");
    EXPECT_EQ(hi.deciding, profile::feature_name(k));
    const Decision lo = decide(m, profile_with(k, 0), both);
    EXPECT_EQ(lo.chosen, "falling") << profile::feature_name(k);
    EXPECT_EQ(lo.deciding, profile::feature_name(k));
    ASSERT_EQ(hi.rows.size(), 2u);
    EXPECT_GT(hi.rows[0].prediction.score, hi.rows[1].prediction.score);
  }
}

TEST(Decide, DifficultyAndTrackLevelCanDecide) {
  const Model m = fit(synthetic_outcomes(64, {{"robust", [](const auto&, double d) { return 40 + 5 * d; }},
                                              {"fragile", [](const auto&, double d) { return 80 - 12 * d; }},
                                              {"weak", [](const auto&, double) { return 10; }}}));
  const std::vector<Gate> gates{{"robust", true, ""}, {"fragile", true, ""}, {"weak", true, ""}};
  const Decision hard = decide(m, profile_with(0, 1, 4), gates);
  EXPECT_EQ(hard.chosen, "robust");
  EXPECT_EQ(hard.deciding, "difficulty");
  const Decision easy = decide(m, profile_with(0, 1, 1), gates);
  EXPECT_EQ(easy.chosen, "fragile");
  EXPECT_EQ(easy.deciding, "difficulty");
  // Between two tracks that differ only in level, the level decides.
  EXPECT_EQ(deciding_term(m, profile_with(0, 1, 2), "robust", "weak"), "track level");
}

TEST(Decide, InfeasibleTracksAreDroppedAndTheRouterAbstainsWithReasons) {
  const Model m = fit(synthetic_outcomes(
      16, {{"a", [](const auto&, double) { return 90; }}, {"b", [](const auto&, double) { return 10; }}}));
  const Decision only_b = decide(m, profile_with(0, 1), {{"a", false, "needs a GPU"}, {"b", true, ""}});
  EXPECT_EQ(only_b.chosen, "b");
  EXPECT_EQ(only_b.deciding, "only feasible track");
  EXPECT_TRUE(only_b.also_measure.empty());

  const Decision none =
      decide(m, profile_with(0, 1), {{"a", false, "needs a GPU"}, {"b", false, "no scatter"}});
  EXPECT_TRUE(none.abstained());
  EXPECT_EQ(none.abstain_reason, "a: needs a GPU; b: no scatter");
  EXPECT_TRUE(decide(m, profile_with(0, 1), {}).abstained());
}

TEST(Decide, AnUnmeasuredTrackIsExploredAndANotedLoserIsNot) {
  const Model m = fit(synthetic_outcomes(100, {{"good", [](const auto&, double) { return 75; }},
                                               {"bad", [](const auto&, double) { return 5; }}}));
  const Decision d =
      decide(m, profile_with(0, 1), {{"good", true, ""}, {"bad", true, ""}, {"new", true, ""}});
  EXPECT_EQ(d.chosen, "good");
  EXPECT_EQ(d.also_measure, std::vector<std::string>{"new"});
  // Without an exploration bonus, nothing is explored.
  EXPECT_TRUE(decide(m, profile_with(0, 1), {{"good", true, ""}, {"new", true, ""}}, {.explore_c = 0})
                  .also_measure.empty());
}

TEST(Decide, WithoutAnyRecordTheFirstFeasibleTrackIsChosen) {
  const Decision d =
      decide(Model{}, profile_with(0, 1), {{"x", false, "no"}, {"y", true, ""}, {"z", true, ""}});
  EXPECT_EQ(d.chosen, "y");
  EXPECT_EQ(d.deciding, "tie (registry order)");
}

}  // namespace
}  // namespace cake::router
