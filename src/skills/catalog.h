// The skills' entry points, one per file (describe.cpp, lower.cpp, evaluate.cpp, debug.cpp, optimize.cpp),
// gathered into the registry by skill.cpp. Internal to skills/.
#pragma once

#include "skills/skill.h"

namespace cake::skills {

Skill describe_skill();
Skill lower_skill();
Skill evaluate_skill();
Skill debug_skill();
Skill optimize_skill();

// Schema of a knob assignment: knob name → value as text.
inline const nlohmann::json kKnobsSchema = R"({
  "type": "object", "additionalProperties": { "type": "string" } })"_json;

}  // namespace cake::skills
