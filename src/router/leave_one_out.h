// Routing quality over a corpus of measured outcomes, leave-one-out: each operator is routed by abilities
// fitted without any of its own outcomes, among the tracks that were measured on it, and the chosen
// track's measured score is compared with the best measured one. A replay over recorded scores: nothing
// is timed, so the router is tested without a benchmark.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "router/ability_model.h"

namespace cake::router {

struct LeaveOneOutRow {
  std::string op;
  std::map<std::string, double> measured;   // track → score 0..100
  std::map<std::string, double> predicted;  // track → ŝ·100 from the held-out fit
  std::string chosen, best;
  std::string
      fixed;  // the choice of the fixed policy: the track with the best mean score on the other operators
  double regret() const { return measured.at(best) - measured.at(chosen); }
  double fixed_regret() const { return measured.at(best) - measured.at(fixed); }
};

struct LeaveOneOut {
  std::vector<LeaveOneOutRow> rows;  // sorted by operator
  double mean_regret = 0;            // mean of best − chosen, score points
  double mean_fixed_regret = 0;      // the same for the fixed policy
  int best_chosen = 0;               // operators where the chosen track is a best one
};

LeaveOneOut leave_one_out(const std::vector<Outcome>& data, const FitOptions& o = {});

}  // namespace cake::router
