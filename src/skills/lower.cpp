// The lower skill: one track lowers the contract with the given knobs (the rest take their defaults) and the
// build service builds it; the result is a recorded candidate, with the build's status, its structured
// diagnostics and the sources a person should read.
#include <algorithm>

#include "skills/catalog.h"

namespace cake::skills {

Skill lower_skill() {
  Skill k;
  k.name = "lower";
  k.summary = "lower a contract with one track and knobs, build it, record the candidate";
  k.input_schema = R"({
    "type": "object", "additionalProperties": false, "required": ["contract", "track"],
    "properties": {
      "contract": { "type": "string" }, "track": { "type": "string" },
      "knobs": { "type": "object" }, "parent": { "type": "integer", "minimum": 1 } } })"_json;
  k.input_schema["properties"]["knobs"] = kKnobsSchema;
  k.output_schema = R"({
    "type": "object", "required": ["ok"],
    "properties": {
      "ok": { "type": "boolean" }, "error": { "type": "string" },
      "candidate": { "type": "integer" }, "track": { "type": "string" }, "knobs": { "type": "object" },
      "main_file": { "type": "string" }, "source_dir": { "type": "string" }, "library": { "type": "string" },
      "build": { "type": "object", "required": ["status"], "properties": {
        "status": { "enum": ["ok", "compile-error", "timeout", "tool-missing"] },
        "hash": { "type": "string" }, "cache_hit": { "type": "boolean" }, "seconds": { "type": "number" },
        "failure": { "type": "string" }, "diagnostics": { "type": "array" } } } } })"_json;
  k.body = [](Session& s, const nlohmann::json& in) {
    const CheckedContract& c = s.contract(in["contract"]);
    const tracks::Track& t = named_track(in);
    const std::string name(t.name());
    if (const tracks::Feasibility f = t.feasible(c, s.machine); !f.ok) {
      return nlohmann::json{{"ok", false},
                            {"error", name + " cannot lower " + c.contract.name + ": " + f.reason}};
    }
    std::optional<int64_t> parent;
    if (in.contains("parent")) parent = in["parent"].get<int64_t>();
    const Built b = s.remember(lower_and_build(
        s, c, t, tracks::Knobs::from_json(in.value("knobs", nlohmann::json::object())), parent));
    nlohmann::json diags = nlohmann::json::array();
    for (size_t i = 0; i < std::min<size_t>(b.build.diagnostics.size(), 12); ++i) {
      const build::Diagnostic& d = b.build.diagnostics[i];
      diags.push_back({{"file", d.file},
                       {"line", d.line},
                       {"col", d.col},
                       {"severity", d.severity},
                       {"message", d.message},
                       {"step", d.step}});
    }
    return nlohmann::json{{"ok", true},
                          {"candidate", b.candidate},
                          {"track", name},
                          {"knobs", b.artifact.knobs.to_json()},
                          {"main_file", b.artifact.main_file},
                          {"source_dir", b.build.directory.string()},
                          {"library", b.build.ok() ? b.build.library.string() : ""},
                          {"build",
                           {{"status", build::status_name(b.build.status)},
                            {"hash", b.build.hash},
                            {"cache_hit", b.build.cache_hit},
                            {"seconds", b.build.seconds},
                            {"failure", b.build.failure},
                            {"diagnostics", diags}}}};
  };
  return k;
}

}  // namespace cake::skills
