// Tests of the Eq. 3 ability fit: predictions follow the recorded outcomes per feature, the centring is
// over distinct operators, uncertainty shrinks with data, and a record survives JSON.
#include <gtest/gtest.h>

#include "core/error.h"
#include "router/ability_model.h"
#include "synthetic.h"

namespace cake::router {
namespace {

using testing::profile_with;
using testing::synthetic_outcomes;

std::array<double, kNumFeatures> xs(const profile::Profile& p) {
  std::array<double, kNumFeatures> x{};
  for (int k = 0; k < kNumFeatures; ++k) x[k] = p.x[k];
  return x;
}

// For every feature: "rising" scores higher as the feature grows, "falling" lower; the fitted model must
// order them that way at both ends of that feature, with everything else held.
TEST(AbilityModel, OrderingFollowsOutcomesPerFeature) {
  for (int k = 0; k < kNumFeatures; ++k) {
    const auto data =
        synthetic_outcomes(64, {{"rising", [k](const auto& x, double) { return 30 + 15 * x[k]; }},
                                {"falling", [k](const auto& x, double) { return 75 - 15 * x[k]; }}});
    const Model m = fit(data);
    const auto lo = profile_with(k, 0), hi = profile_with(k, 3);
    EXPECT_GT(predict(m, "falling", xs(lo), 2).score, predict(m, "rising", xs(lo), 2).score)
        << profile::feature_name(k);
    EXPECT_GT(predict(m, "rising", xs(hi), 2).score, predict(m, "falling", xs(hi), 2).score)
        << profile::feature_name(k);
    // The fitted weight of feature k carries the sign of the rule, and dominates the other features.
    const Vec& rising = m.tracks.at("rising").w;
    EXPECT_GT(rising[1 + k], 0.3) << profile::feature_name(k);
    for (int j = 0; j < kNumFeatures; ++j) {
      if (j != k) {
        EXPECT_LT(std::abs(rising[1 + j]), std::abs(rising[1 + k]) / 3) << profile::feature_name(j);
      }
    }
  }
}

TEST(AbilityModel, PredictionsApproachTheRecordedScores) {
  const auto data =
      synthetic_outcomes(80, {{"t", [](const auto& x, double d) {
                                 return 100 / (1 + std::exp(-(0.8 * x[0] - 0.5 * x[3] - 0.4 * (d - 2))));
                               }}});
  const Model m = fit(data, {.lambda = 1e-3, .lambda_intercept = 1e-3, .iterations = 50});
  for (const Outcome& o : data) EXPECT_NEAR(100 * predict(m, "t", o.x, o.difficulty).score, o.score, 2.0);
  EXPECT_NEAR(m.tracks.at("t").w[kNumParams - 1], 0.4, 0.05);  // b: harder operators score lower
}

TEST(AbilityModel, CentringCountsEachOperatorOnce) {
  std::vector<Outcome> data = synthetic_outcomes(2, {{"a", [](const auto&, double) { return 50; }}});
  data[0].x.fill(0);
  data[1].x.fill(2);
  data.push_back(data[1]);  // op1 measured on a second track
  data.back().track = "b";
  const Model m = fit(data);
  for (double v : m.x_mean) EXPECT_DOUBLE_EQ(v, 1.0);
}

TEST(AbilityModel, UnseenTrackIsThePriorAndUncertaintyShrinksWithData) {
  const auto few = synthetic_outcomes(4, {{"t", [](const auto&, double) { return 70; }}});
  const auto many = synthetic_outcomes(200, {{"t", [](const auto&, double) { return 70; }}});
  const auto x = xs(profile_with(0, 2));
  const Prediction unseen = predict(fit(few), "other", x, 2);
  EXPECT_DOUBLE_EQ(unseen.score, 0.5);
  EXPECT_EQ(unseen.observations, 0);
  const Prediction p4 = predict(fit(few), "t", x, 2), p200 = predict(fit(many), "t", x, 2);
  EXPECT_GT(unseen.sd_z, p4.sd_z);
  EXPECT_GT(p4.sd_z, p200.sd_z);
  EXPECT_NEAR(p200.score, 0.70, 0.02);
  EXPECT_GT(p200.upper, p200.score);
}

TEST(AbilityModel, JsonRoundTripAndMalformedRecords) {
  const Model m = fit(synthetic_outcomes(16, {{"t", [](const auto& x, double) { return 20 + 10 * x[2]; }}}));
  const Ability& a = m.tracks.at("t");
  const Ability b = ability_from_json(nlohmann::json::parse(ability_to_json(a).dump()));
  EXPECT_EQ(a.w, b.w);
  EXPECT_EQ(a.cov, b.cov);
  EXPECT_EQ(a.observations, b.observations);
  nlohmann::json short_theta = ability_to_json(a);
  short_theta["theta"].erase(0);
  EXPECT_THROW(ability_from_json(short_theta), Error);
  EXPECT_THROW(ability_from_json(nlohmann::json{{"a", 1}}), Error);
}

}  // namespace
}  // namespace cake::router
