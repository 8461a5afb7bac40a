// The L1 profile: the features that set operator families apart (DESIGN §4), on the bench suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "contract/contract.h"
#include "core/paths.h"
#include "profile/profile.h"

namespace cake {
namespace {

profile::Profile of(const std::string& name) {
  return profile::profile_of(load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/" + name + ".yaml"));
}

using profile::Blocking;
using profile::Contraction;
using profile::DataMovement;
using profile::Reduction;
using profile::SchedulingDepth;

// Without a level, the difficulty comes from the features: on the bench suite it gives every operator's
// level but add_rms_norm's, whose features equal rms_norm's (an add before the same norm).
TEST(Profile, TheDerivedDifficultyFollowsTheBenchLevels) {
  int agree = 0, total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CAKE_SOURCE_DIR) + "/bench/ops")) {
    if (entry.path().extension() != ".yaml") continue;
    const CheckedContract c = load_and_check(entry.path().string());
    const profile::Profile p = profile::profile_of(c);
    EXPECT_FALSE(p.difficulty_derived);
    EXPECT_EQ(p.difficulty, c.contract.level);
    const int derived = profile::derived_difficulty(p.x);
    ++total;
    if (derived == c.contract.level) {
      ++agree;
    } else {
      EXPECT_EQ(c.contract.name, "add_rms_norm") << "derived " << derived << ", level " << c.contract.level;
    }
  }
  EXPECT_GE(total, 26);
  EXPECT_EQ(agree, total - 1);

  // A contract without a level: the profile says the difficulty is derived, and what bench groups by.
  std::string yaml = read_file(std::string(CAKE_SOURCE_DIR) + "/bench/ops/matmul.yaml").value_or("");
  const size_t at = yaml.find("\nlevel: 3\n");
  ASSERT_NE(at, std::string::npos);
  yaml.erase(at, 9);
  const CheckedContract c = check_contract(load_contract_text(yaml, "matmul_no_level.yaml"));
  ASSERT_EQ(c.contract.level, 0);
  const profile::Profile p = profile::profile_of(c);
  EXPECT_TRUE(p.difficulty_derived);
  EXPECT_EQ(p.difficulty, 3);
  EXPECT_EQ(profile::difficulty_of(c), 3);
  EXPECT_NE(profile::to_text(p).find("difficulty=3 (derived)"), std::string::npos);
}

TEST(Profile, ElementwiseIsTheBaseline) {
  auto g = of("gelu");
  EXPECT_EQ(g.x[Contraction], 0);
  EXPECT_EQ(g.x[Reduction], 0);
  EXPECT_EQ(g.x[DataMovement], 0);
  EXPECT_EQ(g.x[SchedulingDepth], 0);
  EXPECT_EQ(g.x[Blocking], 0);
  EXPECT_EQ(g.difficulty, 1);
}

TEST(Profile, GatherShowsInDataMovement) {
  EXPECT_EQ(of("index_select").x[DataMovement], 2);
  EXPECT_EQ(of("embedding").x[DataMovement], 2);
  EXPECT_EQ(of("scatter_add").x[DataMovement], 3);
  EXPECT_GT(of("index_select").x[DataMovement], of("gelu").x[DataMovement]);
}

TEST(Profile, ConvolutionShowsInBlocking) {
  auto c = of("conv2d");
  EXPECT_EQ(c.x[Blocking], 3);
  EXPECT_EQ(c.x[Contraction], 1);
  EXPECT_GT(c.x[Blocking], of("gelu").x[Blocking]);
  EXPECT_GT(c.x[Blocking], of("matmul").x[Blocking] - 1);
}

TEST(Profile, AttentionShowsInContractionAndSchedulingDepth) {
  auto a = of("attention");
  EXPECT_EQ(a.x[Contraction], 3);
  EXPECT_EQ(a.x[SchedulingDepth], 3);
  EXPECT_EQ(of("matmul").x[Contraction], 2);
  EXPECT_EQ(of("matmul").x[SchedulingDepth], 0);
  EXPECT_EQ(a.difficulty, 4);
}

TEST(Profile, NormalizationsAreMultiPass) {
  EXPECT_EQ(of("reduce_sum").x[Reduction], 1);
  EXPECT_EQ(of("reduce_sum").x[SchedulingDepth], 0);
  EXPECT_EQ(of("rms_norm").x[Reduction], 3);
  EXPECT_EQ(of("rms_norm").x[SchedulingDepth], 1);
  EXPECT_EQ(of("softmax").x[SchedulingDepth], 2);
  EXPECT_EQ(of("cumsum").x[SchedulingDepth], 3);  // prefix dependency
}

TEST(Profile, VersionedAndExplained) {
  auto p = of("softmax");
  auto j = profile::to_json(p);
  EXPECT_EQ(j["version"], profile::kSchemaVersion);
  EXPECT_EQ(j["features"].size(), 8u);
  for (int k = 0; k < profile::kNumFeatures; ++k) {
    EXPECT_GE(p.x[static_cast<size_t>(k)], 0);
    EXPECT_LE(p.x[static_cast<size_t>(k)], 3);
    EXPECT_FALSE(p.why[static_cast<size_t>(k)].empty());
  }
}

}  // namespace
}  // namespace cake
