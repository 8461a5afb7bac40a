// Skills (DESIGN §2): the typed lifecycle tools — describe, lower, optimize, evaluate, debug — that are the
// only way a controller acts on a kernel. Each has a name, a one-line purpose and JSON schemas for its
// input and output; call() validates the input, runs the skill, validates what it returns and traces the
// call (inputs, outputs, elapsed time) in the store's `traces` table under the session's run.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "skills/judge.h"

namespace cake::skills {

struct Skill {
  std::string name;
  std::string summary;
  nlohmann::json input_schema;
  nlohmann::json output_schema;
  std::function<nlohmann::json(Session&, const nlohmann::json&)> body;
};

// Every skill, in lifecycle order: describe, lower, evaluate, debug, optimize.
std::span<const Skill> all_skills();
const Skill* find_skill(std::string_view name);

// A call the skill cannot take: unknown skill, or input that breaks its schema (every error listed).
struct SkillError : Error {
  using Error::Error;
};

// Runs a skill. What goes wrong inside (a contract error, an invalid knob, a failed build) comes back in
// the output as {"ok": false, "error": ...} and is traced like any answer; only a call the skill cannot
// take throws SkillError (and is traced too). An output breaking the skill's own schema is a bug: Error.
nlohmann::json call(Session& s, std::string_view skill, const nlohmann::json& input);

// The schemas of every skill, as one JSON document (what `cake skills` prints).
nlohmann::json catalog();

}  // namespace cake::skills
