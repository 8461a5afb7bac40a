// Leave-one-out replay of the router over recorded outcomes.
#include "router/leave_one_out.h"

#include "router/decide.h"

namespace cake::router {

LeaveOneOut leave_one_out(const std::vector<Outcome>& data, const FitOptions& o) {
  std::map<std::string, std::vector<const Outcome*>> by_op;
  for (const Outcome& d : data) by_op[d.op].push_back(&d);
  LeaveOneOut r;
  for (const auto& [op, own] : by_op) {
    std::vector<Outcome> rest;
    std::map<std::string, std::pair<double, int>> sums;  // track → (sum of scores, count) on other operators
    for (const Outcome& d : data)
      if (d.op != op) {
        rest.push_back(d);
        sums[d.track].first += d.score;
        ++sums[d.track].second;
      }
    const Model m = fit(rest, o);
    profile::Profile p;
    for (int k = 0; k < kNumFeatures; ++k) p.x[k] = static_cast<int>(own.front()->x[k]);
    p.difficulty = static_cast<int>(own.front()->difficulty);
    std::vector<Gate> gates;
    LeaveOneOutRow row;
    row.op = op;
    for (const Outcome* d : own) {
      gates.push_back({d->track, true, ""});
      row.measured[d->track] = d->score;
      if (row.best.empty() || d->score > row.measured[row.best]) row.best = d->track;
    }
    const Decision dec = decide(m, p, gates);
    row.chosen = dec.chosen;
    for (const TrackRow& t : dec.rows) row.predicted[t.gate.track] = 100 * t.prediction.score;
    double fixed_mean = -1;
    for (const Outcome* d : own) {
      const auto it = sums.find(d->track);
      const double mean = it == sums.end() ? 0 : it->second.first / it->second.second;
      if (mean > fixed_mean) fixed_mean = mean, row.fixed = d->track;
    }
    r.mean_regret += row.regret();
    r.mean_fixed_regret += row.fixed_regret();
    r.best_chosen += row.regret() <= 0;
    r.rows.push_back(std::move(row));
  }
  if (!r.rows.empty()) {
    r.mean_regret /= static_cast<double>(r.rows.size());
    r.mean_fixed_regret /= static_cast<double>(r.rows.size());
  }
  return r;
}

}  // namespace cake::router
