// The skill registry and call(): schema checks on the way in and out, and a trace of every call.
#include "skills/skill.h"

#include <fmt/format.h>

#include <chrono>
#include <vector>

#include "skills/catalog.h"
#include "skills/schema.h"

namespace cake::skills {

std::span<const Skill> all_skills() {
  static const std::vector<Skill> kSkills{describe_skill(), lower_skill(), evaluate_skill(), debug_skill(),
                                          optimize_skill()};
  return kSkills;
}

const Skill* find_skill(std::string_view name) {
  for (const Skill& k : all_skills())
    if (k.name == name) return &k;
  return nullptr;
}

namespace {

void trace(Session& s, const std::string& skill, const nlohmann::json& in, const nlohmann::json& out,
           double ms) {
  auto ins = s.db.prepare(
      "INSERT INTO traces(run_id, skill, input_json, output_json, elapsed_ms) VALUES (?, ?, ?, ?, ?)");
  if (s.run) ins.bind(1, *s.run);
  ins.bind(2, skill).bind(3, in.dump()).bind(4, out.dump()).bind(5, ms).step();
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const std::string& e : errors) out += (out.empty() ? "" : "; ") + e;
  return out;
}

}  // namespace

nlohmann::json call(Session& s, std::string_view name, const nlohmann::json& input) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  const Skill* k = find_skill(name);
  if (!k) {
    std::string known;
    for (const Skill& x : all_skills()) known += (known.empty() ? "" : ", ") + x.name;
    trace(s, std::string(name), input, {{"ok", false}, {"error", "unknown skill"}}, ms());
    throw SkillError(fmt::format("unknown skill '{}' (known: {})", name, known));
  }
  if (const auto errors = schema_errors(k->input_schema, input); !errors.empty()) {
    const std::string why = fmt::format("{}: input does not match its schema: {}", k->name, joined(errors));
    trace(s, k->name, input, {{"ok", false}, {"error", why}}, ms());
    throw SkillError(why);
  }
  nlohmann::json out;
  try {
    out = k->body(s, input);
  } catch (const Error& e) {  // contract errors, invalid knobs, unreadable files: the caller's to handle
    out = {{"ok", false}, {"error", e.what()}};
  } catch (const std::exception& e) {  // a bug in the skill: reported, and the controller goes on
    out = {{"ok", false}, {"error", fmt::format("internal error in skill {}: {}", k->name, e.what())}};
  }
  s.status("");
  trace(s, k->name, input, out, ms());
  if (const auto errors = schema_errors(k->output_schema, out); !errors.empty()) {
    throw Error(fmt::format("{}: output does not match its schema (a bug in the skill): {}", k->name,
                            joined(errors)));
  }
  return out;
}

const tracks::Track& named_track(const nlohmann::json& in) {
  const std::string name = in["track"];
  const tracks::Track* t = tracks::find_track(name);
  if (!t) throw Error("unknown track '" + name + "'");
  return *t;
}

TrackKnobs track_knobs(const Session& s, const CheckedContract& c, const nlohmann::json& in) {
  const tracks::Track& t = named_track(in);
  tracks::KnobSpace space = t.knobs(c, s.machine);
  tracks::Knobs knobs = space.resolve(tracks::Knobs::from_json(in["knobs"]));
  return {t, std::move(space), std::move(knobs)};
}

nlohmann::json catalog() {
  nlohmann::json doc = nlohmann::json::array();
  for (const Skill& k : all_skills()) {
    doc.push_back(
        {{"name", k.name}, {"summary", k.summary}, {"input", k.input_schema}, {"output", k.output_schema}});
  }
  return doc;
}

}  // namespace cake::skills
