// The router's decision for one operator (DESIGN §7): L0 drops infeasible tracks (abstaining, with every
// reason, when none is left); L2 predicts each feasible track's score with the ability model; the best
// prediction is exploited, and every feasible contender whose optimistic bound beats it is named to be
// measured too (exploration). The decision says which feature decided between the chosen track and the
// runner-up.
#pragma once

#include <string>
#include <vector>

#include "profile/profile.h"
#include "router/ability_model.h"

namespace cake::router {

// L0's verdict on one track: feasible, or the reason it is not.
struct Gate {
  std::string track;
  bool feasible = true;
  std::string reason;
};

struct TrackRow {
  Gate gate;
  Prediction prediction;  // meaningful when gate.feasible
};

struct DecideOptions {
  double explore_c = 1.0;  // the optimistic bound is σ(z + c·sd(z))
};

struct Decision {
  std::vector<TrackRow> rows;             // in the order the gates were given (registry order)
  std::string chosen;                     // empty when the router abstains
  std::string runner_up;                  // the best other feasible track, empty when none
  std::vector<std::string> also_measure;  // feasible contenders whose bound beats ŝ(chosen)
  std::string deciding;                   // a feature name, "difficulty", "track level" or a phrase
  std::string abstain_reason;             // every track's reason, when chosen is empty
  bool abstained() const { return chosen.empty(); }
};

Decision decide(const Model& m, const profile::Profile& p, const std::vector<Gate>& gates,
                const DecideOptions& o = {});

// The feature whose term contributes most to z(chosen) − z(runner-up): "contraction" … "blocking",
// "difficulty" (the b·d̃ term) or "track level" (the intercepts).
std::string deciding_term(const Model& m, const profile::Profile& p, const std::string& chosen,
                          const std::string& runner_up);

}  // namespace cake::router
