// The L1 profile: the features that set operator families apart (DESIGN §4), on the bench suite.
#include <gtest/gtest.h>

#include "contract/contract.h"
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
