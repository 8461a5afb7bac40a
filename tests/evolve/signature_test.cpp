// Bottleneck signatures from hand-made cases: the roofline position against the ridge point, the profile's
// fusion and contraction features, and the size scaling of efficiency decide; the strategy classes follow.
#include "evolve/signature.h"

#include <gtest/gtest.h>

#include "evolve/strategies.h"

namespace {

using namespace cake;
using nlohmann::json;

const eval::MachinePeaks kPeaks{100e9, 20e9};  // ridge 5 flop/byte

json cases(double intensity, double eff_small, double eff_large) {
  json out = json::array();
  for (int i = 0; i < 4; ++i) {
    const double bytes = 1e3 * std::pow(100, i), eff = i < 2 ? eff_small : eff_large;
    out.push_back({{"verdict", "pass"},
                   {"flops", intensity * bytes},
                   {"bytes", bytes},
                   {"t_floor_s", 1e-3},
                   {"t_cand_s", 1e-3 / eff}});
  }
  out.push_back({{"verdict", "crash"}, {"flops", 1}, {"bytes", 1}, {"t_cand_s", 0}});  // ignored
  return out;
}

profile::Profile prof(int contraction, int fusion) {
  profile::Profile p;
  p.x[profile::Contraction] = contraction;
  p.x[profile::Fusion] = fusion;
  return p;
}

TEST(SignatureTest, RooflinePositionAndProfileDecide) {
  using evolve::Bottleneck;
  EXPECT_EQ(evolve::signature_of(cases(0.5, 0.3, 0.4), prof(0, 2), kPeaks).bottleneck,
            Bottleneck::MemoryFusableChain);
  EXPECT_EQ(evolve::signature_of(cases(0.5, 0.3, 0.4), prof(0, 0), kPeaks).bottleneck,
            Bottleneck::MemoryBound);
  EXPECT_EQ(evolve::signature_of(cases(50, 0.3, 0.4), prof(1, 0), kPeaks).bottleneck,
            Bottleneck::ComputeContraction);
  EXPECT_EQ(evolve::signature_of(cases(50, 0.3, 0.4), prof(3, 2), kPeaks).bottleneck,
            Bottleneck::ComputeContractionChain);
  EXPECT_EQ(evolve::signature_of(cases(50, 0.3, 0.4), prof(0, 0), kPeaks).bottleneck,
            Bottleneck::ComputeVector);
  EXPECT_EQ(evolve::signature_of(cases(50, 0.03, 0.02), prof(0, 0), kPeaks).bottleneck,
            Bottleneck::InstructionBound);
  const evolve::Signature d = evolve::signature_of(cases(0.5, 0.05, 0.5), prof(0, 0), kPeaks);
  EXPECT_EQ(d.bottleneck, Bottleneck::DivergingShapeRegimes);
  EXPECT_NE(d.why.find("ridge 5.00"), std::string::npos) << d.why;
}

TEST(SignatureTest, NoTimedCaseFallsBackAndSays) {
  const evolve::Signature s = evolve::signature_of(json::array(), prof(0, 0), kPeaks);
  EXPECT_EQ(s.why, "no timed passing case");
}

TEST(StrategiesTest, EverySignatureHasClassesWithKnobs) {
  for (int b = 0; b <= int(evolve::Bottleneck::DivergingShapeRegimes); ++b) {
    const auto cls = evolve::classes_for(evolve::Bottleneck(b));
    ASSERT_FALSE(cls.empty());
    for (char c : cls) EXPECT_FALSE(evolve::class_knobs(c).empty()) << c;
  }
  EXPECT_EQ(evolve::classes_for(evolve::Bottleneck::MemoryFusableChain).front(), 'F');
  // Class D: a dtype's own instruction path and arithmetic: bf16's dot product for contractions, and the
  // bf16 and f16 instantiations in f32.
  EXPECT_EQ(evolve::class_knobs('D'), (std::vector<std::string>{"bf16_dot", "bf16_f32", "f16_f32"}));
  const auto contraction = evolve::classes_for(evolve::Bottleneck::ComputeContraction);
  EXPECT_NE(std::find(contraction.begin(), contraction.end(), 'D'), contraction.end());
  // A chain of contractions tries apart before all else (each contraction its own GEMM).
  EXPECT_EQ(evolve::classes_for(evolve::Bottleneck::ComputeContractionChain).front(), 'F');
}

}  // namespace
