// The optimize skill: the variants one move away from a kernel's knobs in its track's space — each integer
// knob one allowed value up or down, each boolean flipped, each choice switched — for a search (Evolution
// mode) to build and measure. `knobs_only` restricts the moves to the named knobs (a strategy's class).
#include <algorithm>

#include "skills/catalog.h"

namespace cake::skills {

Skill optimize_skill() {
  Skill k;
  k.name = "optimize";
  k.summary = "propose variants one knob move away from a kernel, within its track's knob space";
  k.input_schema = R"({
    "type": "object", "additionalProperties": false, "required": ["contract", "track", "knobs"],
    "properties": {
      "contract": { "type": "string" }, "track": { "type": "string" },
      "knobs": { "type": "object" },
      "knobs_only": { "type": "array", "items": { "type": "string" } },
      "max": { "type": "integer", "minimum": 1 } } })"_json;
  k.input_schema["properties"]["knobs"] = kKnobsSchema;
  k.output_schema = R"({
    "type": "object", "required": ["ok"],
    "properties": {
      "ok": { "type": "boolean" }, "error": { "type": "string" },
      "variants": { "type": "array", "items": { "type": "object", "required": ["knobs", "move"],
        "properties": { "move": { "type": "string" } } } } } })"_json;
  k.body = [](Session& s, const nlohmann::json& in) {
    const CheckedContract& c = s.contract(in["contract"]);
    const TrackKnobs tk = track_knobs(s, c, in);
    const tracks::KnobSpace& space = tk.space;
    const tracks::Knobs& base = tk.knobs;
    const std::vector<std::string> only = in.value("knobs_only", std::vector<std::string>{});
    const size_t max = in.value("max", size_t{1000});
    nlohmann::json variants = nlohmann::json::array();
    const auto add = [&](const tracks::KnobSpec& spec, const std::string& value) {
      if (variants.size() >= max) return;
      tracks::Knobs v = base;
      v.set(spec.name, value);
      variants.push_back({{"knobs", v.to_json()}, {"move", spec.name + "=" + value}});
    };
    for (const tracks::KnobSpec& spec : space.specs()) {
      if (!only.empty() && std::find(only.begin(), only.end(), spec.name) == only.end()) continue;
      const std::string now = base.values().at(spec.name);
      switch (spec.kind) {
        case tracks::KnobKind::Bool:
          add(spec, now == "true" ? "false" : "true");
          break;
        case tracks::KnobKind::Choice:
          for (const std::string& ch : spec.choices)
            if (ch != now) add(spec, ch);
          break;
        case tracks::KnobKind::Int: {
          const auto it = std::find(spec.values.begin(), spec.values.end(), std::stoll(now));
          if (it == spec.values.end()) break;
          if (it != spec.values.begin()) add(spec, std::to_string(*(it - 1)));
          if (it + 1 != spec.values.end()) add(spec, std::to_string(*(it + 1)));
          break;
        }
      }
    }
    return nlohmann::json{{"ok", true}, {"variants", variants}};
  };
  return k;
}

}  // namespace cake::skills
