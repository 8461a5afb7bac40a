// Parent selection on made-up variants (no kernel is built or timed): tiers hold correct variants by
// fitness and keep failed ones apart, the tier sampler never returns a failed variant and draws the tiers
// 60 / 30 / 10, track champions are the fittest correct variant of each track within half the leader's
// efficiency, and failed moves are read from the strategies of failed single-track variants.
#include "evolve/parents.h"

#include <gtest/gtest.h>

#include <map>

#include "tracks/regimes/regimes.h"

namespace {

using namespace cake::evolve;

Variant variant(int64_t id, const std::string& track, const std::string& status, double efficiency,
                double total_s = 1, const std::string& strategy = "memory-bound -> P: nv=2") {
  Variant v;
  v.id = id;
  v.track = track;
  v.status = status;
  v.efficiency = efficiency;
  v.total_s = total_s;
  v.strategy = strategy;
  return v;
}

TEST(Fitness, EfficiencyFirstThenTime) {
  EXPECT_TRUE(fitter(variant(1, "simd", "measured", 0.5, 9), variant(2, "simd", "measured", 0.4, 1)));
  EXPECT_TRUE(fitter(variant(1, "simd", "measured", 0.5, 1), variant(2, "simd", "measured", 0.5, 2)));
  EXPECT_FALSE(fitter(variant(1, "simd", "measured", 0.5, 2), variant(2, "simd", "measured", 0.5, 1)));
}

TEST(Tiers, CorrectVariantsInThirdsFailedOnesApart) {
  std::vector<Variant> all;
  all.reserve(9);
  for (int i = 0; i < 7; ++i) all.push_back(variant(i + 1, "simd", "measured", 0.1 * (i + 1)));
  all.push_back(variant(8, "simd", "failed", 0.99));  // a high efficiency does not make it a parent
  all.push_back(variant(9, "simd", "planned", 0));
  const Tiers t = tier(all);
  ASSERT_EQ(t.good.size(), 3u);
  ASSERT_EQ(t.medium.size(), 3u);
  ASSERT_EQ(t.poor.size(), 1u);
  ASSERT_EQ(t.failed.size(), 1u);
  EXPECT_EQ(t.good.front()->id, 7);  // fittest first
  EXPECT_EQ(t.poor.front()->id, 1);
  EXPECT_EQ(t.failed.front()->id, 8);
  ASSERT_NE(best_of(all, 1), nullptr);
  EXPECT_EQ(best_of(all, 1)->id, 7);
}

TEST(SampleParent, NeverAFailedVariantAndTheTiersDrawSixtyThirtyTen) {
  std::vector<Variant> all;
  all.reserve(18);
  for (int i = 0; i < 9; ++i) all.push_back(variant(i + 1, "simd", "measured", 0.1 * (i + 1)));
  for (int i = 0; i < 9; ++i) all.push_back(variant(i + 10, "simd", "failed", 1.0));
  const Tiers t = tier(all);
  std::mt19937_64 rng(7);
  std::map<std::string, int> drawn;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const Variant* p = sample_parent(t, rng);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(p->correct()) << "variant " << p->id << " is " << p->status;
    drawn[p->efficiency > 0.65 ? "good" : p->efficiency > 0.35 ? "medium" : "poor"]++;
  }
  EXPECT_NEAR(drawn["good"] / double(n), 0.6, 0.02);
  EXPECT_NEAR(drawn["medium"] / double(n), 0.3, 0.02);
  EXPECT_NEAR(drawn["poor"] / double(n), 0.1, 0.02);
}

TEST(SampleParent, AnEmptyTierPassesItsShareOnAndNoCorrectVariantMeansNoParent) {
  std::vector<Variant> one = {variant(1, "simd", "measured", 0.2), variant(2, "simd", "failed", 0.9)};
  std::mt19937_64 rng(1);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sample_parent(tier(one), rng)->id, 1);
  std::vector<Variant> none = {variant(1, "simd", "failed", 0.9), variant(2, "halide", "planned", 0)};
  EXPECT_EQ(sample_parent(tier(none), rng), nullptr);
}

TEST(TrackChampions, FittestCorrectVariantPerTrackWithinHalfTheLeader) {
  const std::vector<Variant> all = {
      variant(1, "simd", "measured", 0.171),  variant(2, "simd", "measured", 0.30),
      variant(3, "simd", "failed", 0.90),     variant(4, "halide", "measured", 0.16),
      variant(5, "halide", "measured", 0.12), variant(6, "opencl", "measured", 0.008),
      variant(7, "ascend", "failed", 0.5),
  };
  const std::vector<const Variant*> c = track_champions(all);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]->id, 2);  // the leader: simd's fittest correct variant, not its failed one
  EXPECT_EQ(c[1]->id, 4);  // halide at 0.16 >= 0.5 * 0.30; opencl at 0.008 takes no turn
  // Every track with a correct variant at min_share 0; none for a track with only failed ones.
  const std::vector<const Variant*> every = track_champions(all, 0);
  ASSERT_EQ(every.size(), 3u);
  EXPECT_EQ(every[2]->id, 6);
  EXPECT_TRUE(track_champions({variant(1, "simd", "failed", 0.5)}).empty());
}

TEST(FailedMoves, MovesOfFailedSingleTrackVariants) {
  const std::vector<Variant> all = {
      variant(1, "simd", "failed", 0, 1, "compute-bound-contraction -> A: acc=f32"),
      variant(2, "simd", "measured", 0.2, 1, "compute-bound-contraction -> P: nr=2"),
      variant(3, cake::tracks::kRegimesTrack, "failed", 0, 1, "diverging-shape-regimes -> H: regimes: x"),
      variant(4, "halide", "failed", 0, 1, "seed"),
  };
  EXPECT_EQ(failed_moves(all), (std::set<std::string>{"simd|acc=f32"}));
}

}  // namespace
