// Router outcomes and abilities in the store: router_outcomes rows in, router_abilities rows out.
#include "router/record.h"

#include <map>

#include "core/error.h"

namespace cake::router {

void record_outcome(store::Store& db, const Key& k, const Outcome& o, std::optional<int64_t> run_id) {
  const nlohmann::json profile{{"x", o.x}, {"difficulty", o.difficulty}};
  auto st = db.prepare(
      "INSERT INTO router_outcomes(target, policy, track, operator, contract_hash, profile_json, score, "
      "run_id) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(1, k.target).bind(2, k.policy).bind(3, o.track).bind(4, o.op).bind(5, o.contract_hash);
  st.bind(6, profile.dump()).bind(7, o.score);
  if (run_id)
    st.bind(8, *run_id);
  else
    st.bind_null(8);
  st.step();
}

std::vector<Outcome> load_outcomes(store::Store& db, const Key& k) {
  auto st = db.prepare(
      "SELECT operator, contract_hash, track, profile_json, score FROM router_outcomes "
      "WHERE target = ? AND policy = ? ORDER BY id");
  st.bind(1, k.target).bind(2, k.policy);
  std::map<std::pair<std::string, std::string>, size_t> index;  // (operator, track) → position
  std::vector<Outcome> out;
  while (st.step()) {
    Outcome o;
    o.op = st.column_text(0);
    o.contract_hash = st.column_text(1);
    o.track = st.column_text(2);
    try {
      const auto j = nlohmann::json::parse(st.column_text(3));
      o.x = j.at("x").get<std::array<double, kNumFeatures>>();
      o.difficulty = j.at("difficulty").get<double>();
    } catch (const nlohmann::json::exception& e) {
      throw Error("router outcome of " + o.op + " on " + o.track + ": malformed profile: " + e.what());
    }
    o.score = st.column_double(4);
    const auto [it, fresh] = index.emplace(std::pair{o.op, o.track}, out.size());
    if (fresh)
      out.push_back(std::move(o));
    else
      out[it->second] = std::move(o);
  }
  return out;
}

void save_model(store::Store& db, const Key& k, const Model& m) {
  store::Transaction tx(db);
  db.prepare("DELETE FROM router_abilities WHERE target = ? AND policy = ?")
      .bind(1, k.target)
      .bind(2, k.policy)
      .step();
  for (const auto& [track, a] : m.tracks) {
    nlohmann::json j = ability_to_json(a);
    j["x_mean"] = m.x_mean;
    j["d_mean"] = m.d_mean;
    j["lambda"] = m.options.lambda;
    j["lambda_intercept"] = m.options.lambda_intercept;
    db.prepare("INSERT INTO router_abilities(target, policy, track, params_json) VALUES (?, ?, ?, ?)")
        .bind(1, k.target)
        .bind(2, k.policy)
        .bind(3, track)
        .bind(4, j.dump())
        .step();
  }
  tx.commit();
}

Model load_model(store::Store& db, const Key& k) {
  Model m;
  auto st = db.prepare("SELECT track, params_json FROM router_abilities WHERE target = ? AND policy = ?");
  st.bind(1, k.target).bind(2, k.policy);
  while (st.step()) {
    const std::string track = st.column_text(0);
    try {
      const auto j = nlohmann::json::parse(st.column_text(1));
      m.tracks[track] = ability_from_json(j);
      m.x_mean = j.at("x_mean").get<std::array<double, kNumFeatures>>();
      m.d_mean = j.at("d_mean").get<double>();
      m.options.lambda = j.value("lambda", m.options.lambda);
      m.options.lambda_intercept = j.value("lambda_intercept", m.options.lambda_intercept);
    } catch (const nlohmann::json::exception& e) {
      throw Error("router ability of " + track + ": " + e.what());
    } catch (const Error& e) {
      throw Error("router ability of " + track + ": " + e.what());
    }
  }
  return m;
}

Model refit(store::Store& db, const Key& k, const FitOptions& o) {
  Model m = fit(load_outcomes(db, k), o);
  save_model(db, k, m);
  return m;
}

}  // namespace cake::router
