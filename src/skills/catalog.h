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

// The track named by in["track"]; throws cake::Error (which call() returns as {"ok": false}) when none is.
const tracks::Track& named_track(const nlohmann::json& in);

// in["track"], its knob space for the contract, and in["knobs"] resolved against it (throws cake::Error on
// an unknown track or knob, or a value outside the space).
struct TrackKnobs {
  const tracks::Track& track;
  tracks::KnobSpace space;
  tracks::Knobs knobs;
};
TrackKnobs track_knobs(const Session& s, const CheckedContract& c, const nlohmann::json& in);

// Schema of a knob assignment: knob name → value as text.
inline const nlohmann::json kKnobsSchema = R"({
  "type": "object", "additionalProperties": { "type": "string" } })"_json;

}  // namespace cake::skills
