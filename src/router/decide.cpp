// L0 + L2 decision: feasible tracks, predictions, exploit / explore, the deciding feature.
#include "router/decide.h"

#include <limits>

namespace cake::router {

namespace {

std::array<double, kNumFeatures> features(const profile::Profile& p) {
  std::array<double, kNumFeatures> x{};
  for (int k = 0; k < kNumFeatures; ++k) x[k] = p.x[k];
  return x;
}

const Vec& weights(const Model& m, const std::string& track) {
  static const Vec kPrior{};
  const auto it = m.tracks.find(track);
  return it == m.tracks.end() ? kPrior : it->second.w;
}

}  // namespace

std::string deciding_term(const Model& m, const profile::Profile& p, const std::string& chosen,
                          const std::string& runner_up) {
  const Vec phi = design(m, features(p), p.difficulty);
  const Vec& a = weights(m, chosen);
  const Vec& b = weights(m, runner_up);
  int best = 0;
  double best_gain = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < kNumParams; ++i) {
    const double gain = (a[i] - b[i]) * phi[i];
    if (gain > best_gain) best_gain = gain, best = i;
  }
  if (best == 0) return "track level";
  if (best == kNumParams - 1) return "difficulty";
  return std::string(profile::feature_name(best - 1));
}

Decision decide(const Model& m, const profile::Profile& p, const std::vector<Gate>& gates,
                const DecideOptions& o) {
  Decision d;
  const auto x = features(p);
  const TrackRow* best = nullptr;
  const TrackRow* second = nullptr;
  for (const Gate& g : gates) {
    d.rows.push_back({g, g.feasible ? predict(m, g.track, x, p.difficulty, o.explore_c) : Prediction{}});
  }
  for (const TrackRow& r : d.rows) {
    if (!r.gate.feasible) continue;
    if (!best || r.prediction.score > best->prediction.score) {
      second = best;
      best = &r;
    } else if (!second || r.prediction.score > second->prediction.score) {
      second = &r;
    }
  }
  if (!best) {
    for (const TrackRow& r : d.rows)
      d.abstain_reason += (d.abstain_reason.empty() ? "" : "; ") + r.gate.track + ": " + r.gate.reason;
    if (d.rows.empty()) d.abstain_reason = "no track is registered";
    return d;
  }
  d.chosen = best->gate.track;
  if (!second) {
    d.deciding = "only feasible track";
    return d;
  }
  d.runner_up = second->gate.track;
  for (const TrackRow& r : d.rows)
    if (r.gate.feasible && &r != best && r.prediction.upper > best->prediction.score)
      d.also_measure.push_back(r.gate.track);
  d.deciding = best->prediction.score == second->prediction.score
                   ? "tie (registry order)"
                   : deciding_term(m, p, d.chosen, d.runner_up);
  return d;
}

}  // namespace cake::router
