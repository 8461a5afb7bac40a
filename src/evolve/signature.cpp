// signature_of (signature.h): roofline position and size scaling of the passing cases.
#include "evolve/signature.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cake::evolve {

std::string_view bottleneck_name(Bottleneck b) {
  switch (b) {
    case Bottleneck::MemoryFusableChain:
      return "memory-bound-fusable-chain";
    case Bottleneck::MemoryBound:
      return "memory-bound";
    case Bottleneck::ComputeContraction:
      return "compute-bound-contraction";
    case Bottleneck::ComputeContractionChain:
      return "compute-bound-contraction-chain";
    case Bottleneck::ComputeVector:
      return "compute-bound-vector";
    case Bottleneck::InstructionBound:
      return "instruction-bound";
    case Bottleneck::DivergingShapeRegimes:
      return "diverging-shape-regimes";
  }
  return "?";
}

Signature signature_of(const nlohmann::json& cases, const profile::Profile& p,
                       const eval::MachinePeaks& peaks) {
  struct Point {
    double bytes, intensity, efficiency;
  };
  std::vector<Point> pts;
  for (const nlohmann::json& k : cases) {
    const double t = k.value("t_cand_s", 0.0), fl = k.value("flops", 0.0), by = k.value("bytes", 0.0);
    if (k.value("verdict", "") != "pass" || t <= 0 || by <= 0) continue;
    pts.push_back({by, fl / by, k.value("t_floor_s", 0.0) / t});
  }
  Signature s;
  if (pts.empty()) {
    s.why = "no timed passing case";
    return s;
  }
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.bytes < b.bytes; });
  // The large half of the cases decides the roofline position; the two halves' efficiencies the scaling.
  const size_t half = pts.size() / 2;
  double eff_small = 0, eff_large = 0, intensity = 0;
  for (size_t i = 0; i < pts.size(); ++i) (i < half ? eff_small : eff_large) += pts[i].efficiency;
  for (size_t i = half; i < pts.size(); ++i) intensity += pts[i].intensity;
  eff_small = half ? eff_small / half : 0;
  eff_large /= pts.size() - half;
  intensity /= pts.size() - half;
  const double ridge = peaks.bytes_per_s > 0 ? peaks.flops_per_s / peaks.bytes_per_s : 1;
  const double spread =
      eff_small > 0 && eff_large > 0 ? std::max(eff_small / eff_large, eff_large / eff_small) : 1;
  s.why = fmt::format(
      "intensity {:.2f} flop/byte vs ridge {:.2f}; efficiency {:.3f} (small cases) / {:.3f} (large)",
      intensity, ridge, eff_small, eff_large);
  if (half && spread > 4) {
    s.bottleneck = Bottleneck::DivergingShapeRegimes;
  } else if (intensity < ridge) {
    s.bottleneck = p.x[profile::Fusion] >= 1 ? Bottleneck::MemoryFusableChain : Bottleneck::MemoryBound;
  } else if (p.x[profile::Contraction] >= 1) {
    // Profile contraction 3: a contraction consumes another's result.
    s.bottleneck =
        p.x[profile::Contraction] >= 3 ? Bottleneck::ComputeContractionChain : Bottleneck::ComputeContraction;
  } else {
    s.bottleneck = eff_large < 0.05 ? Bottleneck::InstructionBound : Bottleneck::ComputeVector;
  }
  return s;
}

}  // namespace cake::evolve
