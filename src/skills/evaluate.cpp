// The evaluate skill: CAKE-Bench on one kernel — a candidate lowered in this session, or a shared object
// someone else built (the C ABI of DESIGN §5) — over the standard or hidden cases: verdict and precision
// per case, and with timing the baseline, roofline floor, HAP and score. Every case is recorded.
#include "skills/catalog.h"

namespace cake::skills {

namespace {

// A kernel CAKE did not build: recorded as a candidate of track "external".
Built external_kernel(Session& s, const std::filesystem::path& library) {
  Built b;
  b.artifact.track = "external";
  b.build.library = std::filesystem::absolute(library);
  b.build.directory = b.build.library.parent_path();
  auto ins = s.db.prepare("INSERT INTO candidates(run_id, track, artifact_path) VALUES (?, 'external', ?)");
  if (s.run) ins.bind(1, *s.run);
  ins.bind(2, b.build.library.string()).step();
  b.candidate = s.db.last_insert_rowid();
  return b;
}

}  // namespace

Skill evaluate_skill() {
  Skill k;
  k.name = "evaluate";
  k.summary = "run a kernel on a case set in the sandbox: verdicts, precision, and with timing the score";
  k.input_schema = R"({
    "type": "object", "additionalProperties": false, "required": ["contract"],
    "properties": {
      "contract": { "type": "string" },
      "candidate": { "type": "integer", "minimum": 1 },
      "library": { "type": "string" },
      "set": { "enum": ["standard", "hidden"] },
      "timing": { "type": "boolean" } } })"_json;
  k.output_schema = R"({
    "type": "object", "required": ["ok"],
    "properties": {
      "ok": { "type": "boolean" }, "error": { "type": "string" },
      "candidate": { "type": "integer" }, "track": { "type": "string" }, "set": { "type": "string" },
      "build": { "type": "string" }, "timed": { "type": "boolean" },
      "passed": { "type": "integer" }, "total": { "type": "integer" }, "score": { "type": "number" }, "total_s": { "type": "number" },
      "mean_hap": { "type": "number" }, "mean_efficiency": { "type": "number" },
      "speedup_over_baseline": { "type": "number" },
      "cases": { "type": "array", "items": { "type": "object",
        "required": ["id", "dtype", "verdict", "detail", "mere", "mare"] } } } })"_json;
  k.body = [](Session& s, const nlohmann::json& in) {
    const std::string file = in["contract"];
    const CheckedContract& c = s.contract(file);
    const bool has_candidate = in.contains("candidate"), has_library = in.contains("library");
    if (has_candidate == has_library)
      return nlohmann::json{{"ok", false}, {"error", "give exactly one of candidate and library"}};
    const Built* b = nullptr;
    if (has_candidate) {
      b = s.built(in["candidate"].get<int64_t>());
      if (!b) {
        return nlohmann::json{
            {"ok", false},
            {"error", "candidate " + in["candidate"].dump() + " was not lowered in this session"}};
      }
    } else {
      const std::string lib = in["library"];
      if (!std::filesystem::is_regular_file(lib))
        return nlohmann::json{{"ok", false}, {"error", "no such kernel library: " + lib}};
      b = &s.remember(external_kernel(s, lib));
    }
    const cases::Set set =
        in.value("set", "standard") == "hidden" ? cases::Set::Hidden : cases::Set::Standard;
    nlohmann::json out = judge(s, c, file, *b, set, in.value("timing", true)).op;
    out["ok"] = true;
    out["candidate"] = b->candidate;
    out.erase("file");
    out.erase("name");
    out.erase("level");
    return out;
  };
  return k;
}

}  // namespace cake::skills
