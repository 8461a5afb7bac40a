// L3 of the router (DESIGN §7): every measured (operator, track) outcome is recorded in the store under a
// (target, policy) key; refitting reads them back, fits the abilities and saves one router_abilities row
// per track, which the next decision loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "router/ability_model.h"
#include "store/store.h"

namespace cake::router {

// The key abilities are kept under: a target (e.g. "cpu-avx2") and a policy (e.g. "builtin").
struct Key {
  std::string target;
  std::string policy = "builtin";
};

void record_outcome(store::Store& db, const Key& k, const Outcome& o, std::optional<int64_t> run_id = {});
// Every outcome recorded under k, oldest first. A later outcome of the same (operator, track) replaces
// an earlier one: the router learns from the latest measurement of each pair.
std::vector<Outcome> load_outcomes(store::Store& db, const Key& k);

// Saves the model's abilities (replacing those stored under k) with its centring, in one transaction.
void save_model(store::Store& db, const Key& k, const Model& m);
// The abilities stored under k; a model with no tracks when none are (every prediction is the prior).
// Throws cake::Error on a malformed record.
Model load_model(store::Store& db, const Key& k);

// load_outcomes, fit, save_model: the refit after a measurement.
Model refit(store::Store& db, const Key& k, const FitOptions& o = {});

}  // namespace cake::router
