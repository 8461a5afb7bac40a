// Synthetic router outcomes: operators on a grid of profiles, and tracks whose scores follow a known
// rule per feature, so a test knows which track should win where and why.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "router/ability_model.h"

namespace cake::router::testing {

using ScoreRule = std::function<double(const std::array<double, kNumFeatures>& x, double difficulty)>;

// Operators op0..op{n-1} with feature values cycling through 0..3 (feature k of operator i is
// (i / 4^k... ) mixed deterministically) and difficulty 1..4; one outcome per (operator, track).
inline std::vector<Outcome> synthetic_outcomes(int n,
                                               const std::vector<std::pair<std::string, ScoreRule>>& tracks) {
  std::vector<Outcome> out;
  unsigned state = 12345;
  const auto next = [&state] {
    state = state * 1103515245u + 12345u;
    return (state >> 16) & 3u;
  };
  for (int i = 0; i < n; ++i) {
    std::array<double, kNumFeatures> x{};
    for (double& v : x) v = next();
    const double d = 1 + next();
    for (const auto& [track, rule] : tracks) {
      Outcome o;
      o.op = "op" + std::to_string(i);
      o.contract_hash = "hash" + std::to_string(i);
      o.track = track;
      o.x = x;
      o.difficulty = d;
      o.score = rule(x, d);
      out.push_back(o);
    }
  }
  return out;
}

inline profile::Profile profile_with(int feature, int value, int difficulty = 2) {
  profile::Profile p;
  p.x.fill(1);
  p.x[feature] = value;
  p.difficulty = difficulty;
  return p;
}

}  // namespace cake::router::testing
