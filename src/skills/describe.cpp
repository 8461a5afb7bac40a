// The describe skill: what a contract is — operator, level, dtypes, the L1 structural profile — and the
// router's decision for it on this machine (L0 gate, L2 predictions, chosen track, runner-up, tracks to
// measure too, the deciding feature).
#include "profile/profile.h"
#include "router/gate.h"
#include "router/record.h"
#include "skills/catalog.h"

namespace cake::skills {

Skill describe_skill() {
  Skill k;
  k.name = "describe";
  k.summary =
      "profile a contract and route it: features, difficulty, predicted score per track, chosen track";
  k.input_schema = R"({
    "type": "object", "additionalProperties": false, "required": ["contract"],
    "properties": { "contract": { "type": "string" } } })"_json;
  k.output_schema = R"({
    "type": "object", "required": ["ok"],
    "properties": {
      "ok": { "type": "boolean" }, "error": { "type": "string" },
      "operator": { "type": "string" }, "level": { "type": "integer" },
      "contract_hash": { "type": "string" },
      "dtypes": { "type": "array", "items": { "type": "string" } },
      "profile": { "type": "object" },
      "routing": { "type": "object", "required": ["chosen", "tracks"], "properties": {
        "chosen": { "type": "string" }, "runner_up": { "type": "string" },
        "also_measure": { "type": "array", "items": { "type": "string" } },
        "deciding": { "type": "string" }, "abstain_reason": { "type": "string" },
        "tracks": { "type": "array", "items": { "type": "object", "required": ["track", "feasible"] } } } } } })"_json;
  k.body = [](Session& s, const nlohmann::json& in) {
    const CheckedContract& c = s.contract(in["contract"]);
    const profile::Profile p = profile::profile_of(c);
    const router::Decision d =
        router::decide(router::load_model(s.db, router::Key{router::target_key(s.machine)}), p,
                       router::feasibility_gate(c, s.machine));
    nlohmann::json dtypes = nlohmann::json::array();
    for (DType t : c.contract.dtypes) dtypes.push_back(dtype_name(t));
    nlohmann::json rows = nlohmann::json::array();
    for (const router::TrackRow& r : d.rows) {
      nlohmann::json row{{"track", r.gate.track}, {"feasible", r.gate.feasible}};
      if (r.gate.feasible) {
        row["predicted"] = 100 * r.prediction.score;
        row["upper"] = 100 * r.prediction.upper;
        row["observations"] = r.prediction.observations;
      } else {
        row["reason"] = r.gate.reason;
      }
      rows.push_back(std::move(row));
    }
    return nlohmann::json{{"ok", true},
                          {"operator", c.contract.name},
                          {"level", p.difficulty},
                          {"contract_hash", c.hash},
                          {"dtypes", dtypes},
                          {"profile", profile::to_json(p)},
                          {"routing",
                           {{"chosen", d.chosen},
                            {"runner_up", d.runner_up},
                            {"also_measure", d.also_measure},
                            {"deciding", d.deciding},
                            {"abstain_reason", d.abstain_reason},
                            {"tracks", rows}}}};
  };
  return k;
}

}  // namespace cake::skills
