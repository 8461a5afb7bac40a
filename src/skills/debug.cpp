// The debug skill: reads what went wrong with a candidate (its build, or the verdicts of its cases),
// names the failure class with the evidence (worst case, dtype, errors against the gate), and proposes
// repairs as knob assignments of the same track, most likely first, none already tried. The repairs are
// intents — more precision, more conservative code generation, serial execution — applied through the
// knobs the track's space actually has, so a new track's knobs join an intent by adding their names to it
// (kPrecise, kConservative, kStrictFloat, kSerial below).
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "skills/catalog.h"

namespace cake::skills {

namespace {

struct Intent {
  const char* name;
  const char* why;
  std::vector<std::pair<const char*, const char*>> knobs;  // knob → value, where the space has it
};

// Knob names are shared across tracks where they mean the same thing (compute, acc); each intent lists
// every track's spelling.
const Intent kPrecise{"precise",
                      "accumulate and compute in f64 (precision: rounding or cancellation in f32)",
                      {{"accum_f32", "f64"},
                       {"accum_lowp", "f64"},
                       {"f64_elementwise", "true"},
                       {"compute", "f64"},
                       {"acc", "f64"}}};
const Intent kConservative{
    "conservative",
    "plain loops: no packed GEMM, no transposed copies, no reduction lanes, stages kept",
    {{"schedule", "manual"},
     {"vectorize_reductions", "false"},
     {"transpose_inputs", "false"},
     {"stages", "root"},
     {"unroll_k", "1"},
     {"gemm", "false"},
     {"vectorize", "false"},
     {"unroll", "1"},
     {"fusion", "none"},
     {"local_reduce", "off"},
     {"ipw", "1"}}};
const Intent kStrictFloat{
    "strict-float",
    "IEEE float semantics: NaNs and infinities where the reference has them (no fast-math)",
    {{"strict_float", "true"}}};
const Intent kSerial{
    "serial", "one thread (a race or a partition bug)", {{"parallel", "false"}, {"threads", "1"}}};

// The failure class of an evaluation (or build) and the intents to try, in order.
struct Diagnosis {
  std::string klass;
  nlohmann::json evidence = nlohmann::json::object();
  std::vector<std::vector<const Intent*>> plan;
};

Diagnosis diagnose(const nlohmann::json& in) {
  Diagnosis d;
  if (in.contains("build") && in["build"].value("status", "ok") != "ok") {
    d.klass = "build-failed";
    d.evidence = {{"status", in["build"]["status"]}, {"detail", in["build"].value("failure", "")}};
    if (in["build"].contains("diagnostics") && !in["build"]["diagnostics"].empty())
      d.evidence["first_error"] = in["build"]["diagnostics"][0];
    d.plan = {{&kConservative}, {&kConservative, &kSerial}};
    return d;
  }
  // The worst failed case: a crash-like verdict outranks a wrong result, a larger error outranks a smaller.
  const nlohmann::json* worst = nullptr;
  int failed = 0;
  const auto rank = [](const nlohmann::json& k) { return k["verdict"] == "wrong-result" ? 0 : 1; };
  static const nlohmann::json kNoCases = nlohmann::json::array();
  const nlohmann::json& cases =
      in.contains("evaluation") && in["evaluation"].contains("cases") ? in["evaluation"]["cases"] : kNoCases;
  for (const nlohmann::json& k : cases) {
    if (k["verdict"] == "pass") continue;
    ++failed;
    if (!worst || rank(k) > rank(*worst) ||
        (rank(k) == rank(*worst) && k.value("mare", 0.0) > worst->value("mare", 0.0)))
      worst = &k;
  }
  if (!worst) {
    d.klass = failed ? "unknown" : "none";
    return d;
  }
  const std::string verdict = (*worst)["verdict"];
  d.evidence = {{"failed_cases", failed},
                {"case", (*worst)["id"]},
                {"dtype", (*worst)["dtype"]},
                {"verdict", verdict},
                {"detail", (*worst)["detail"]},
                {"mere", (*worst).value("mere", 0.0)},
                {"mare", (*worst).value("mare", 0.0)}};
  const std::string gate = (*worst).value("gate", "");
  if (verdict == "wrong-result" && gate == "nan-position") {
    // A NaN where the reference has a number, or a number where it has NaN: fast-math code assuming no NaN
    // or infinity, else a logic error.
    d.klass = "wrong-result";
    d.plan = {{&kStrictFloat},
              {&kStrictFloat, &kConservative},
              {&kConservative},
              {&kConservative, &kSerial},
              {&kPrecise, &kConservative, &kSerial}};
  } else if (verdict == "wrong-result" && (gate == "mere" || gate == "mare")) {
    d.klass = "precision";
    d.plan = {{&kPrecise}, {&kPrecise, &kConservative}, {&kPrecise, &kConservative, &kSerial}};
  } else if (verdict == "wrong-result" || verdict == "no-output") {
    d.klass = "wrong-result";  // NaN positions, exact integers, untouched outputs: a logic error
    d.plan = {{&kConservative}, {&kConservative, &kSerial}, {&kPrecise, &kConservative, &kSerial}};
  } else if (verdict == "harness-error") {
    d.klass = "harness";  // not the kernel's fault: nothing to repair
  } else if (verdict == "out-of-memory") {
    d.klass = "memory";
    d.plan = {{&kConservative}};
  } else {
    d.klass = "fault";  // crash, timeout, stray or late writes, mutated inputs, stale results
    d.plan = {{&kSerial}, {&kConservative, &kSerial}, {&kConservative}};
  }
  return d;
}

}  // namespace

Skill debug_skill() {
  Skill k;
  k.name = "debug";
  k.summary = "diagnose a failed build or failed cases and propose repairs (knobs of the same track)";
  k.input_schema = R"({
    "type": "object", "additionalProperties": false, "required": ["contract", "track", "knobs"],
    "properties": {
      "contract": { "type": "string" }, "track": { "type": "string" },
      "knobs": { "type": "object" },
      "build": { "type": "object" },
      "evaluation": { "type": "object", "properties": { "cases": { "type": "array" } } },
      "tried": { "type": "array", "items": { "type": "object" } } } })"_json;
  k.input_schema["properties"]["knobs"] = kKnobsSchema;
  k.input_schema["properties"]["tried"]["items"] = kKnobsSchema;
  k.output_schema = R"({
    "type": "object", "required": ["ok"],
    "properties": {
      "ok": { "type": "boolean" }, "error": { "type": "string" },
      "diagnosis": { "type": "object", "required": ["class"], "properties": {
        "class": { "enum": ["none", "build-failed", "precision", "wrong-result", "fault", "memory", "harness",
                            "unknown"] } } },
      "repairs": { "type": "array", "items": { "type": "object", "required": ["knobs", "why"] } },
      "exhausted": { "type": "boolean" } } })"_json;
  k.body = [](Session& s, const nlohmann::json& in) {
    const CheckedContract& c = s.contract(in["contract"]);
    const TrackKnobs tk = track_knobs(s, c, in);
    const tracks::KnobSpace& space = tk.space;
    const tracks::Knobs& current = tk.knobs;
    std::vector<tracks::Knobs> seen{current};
    for (const nlohmann::json& j : in.value("tried", nlohmann::json::array()))
      seen.push_back(space.resolve(tracks::Knobs::from_json(j)));
    const Diagnosis d = diagnose(in);
    nlohmann::json repairs = nlohmann::json::array();
    for (const std::vector<const Intent*>& step : d.plan) {
      tracks::Knobs next = current;
      std::string why;
      for (const Intent* intent : step) {
        for (const auto& [name, value] : intent->knobs) {
          const tracks::KnobSpec* spec = space.find(name);
          if (spec && spec->allows(value)) next.set(name, value);
        }
        why += (why.empty() ? "" : "; ") + std::string(intent->why);
      }
      if (std::find(seen.begin(), seen.end(), next) != seen.end()) continue;
      seen.push_back(next);
      repairs.push_back({{"knobs", next.to_json()}, {"why", why}});
    }
    nlohmann::json diagnosis = d.evidence;
    diagnosis["class"] = d.klass;
    return nlohmann::json{
        {"ok", true}, {"diagnosis", diagnosis}, {"repairs", repairs}, {"exhausted", repairs.empty()}};
  };
  return k;
}

}  // namespace cake::skills
