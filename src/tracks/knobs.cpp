// Knob assignments and knob spaces: typed reads, defaults, validation against the space, JSON.
#include "tracks/knobs.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/error.h"

namespace cake::tracks {

namespace {
const std::string& get(const std::map<std::string, std::string>& v, const std::string& name) {
  auto it = v.find(name);
  if (it == v.end()) throw Error("knob '" + name + "' has no value");
  return it->second;
}
bool parse_int(const std::string& s, int64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
std::string allowed(const KnobSpec& k) {
  if (k.kind == KnobKind::Bool) return "true, false";
  std::vector<std::string> items = k.choices;
  if (k.kind == KnobKind::Int) {
    items.clear();
    for (int64_t v : k.values) items.push_back(std::to_string(v));
  }
  std::string s;
  for (const std::string& x : items) {
    if (!s.empty()) s += ", ";
    s += x;
  }
  return s;
}
}  // namespace

int64_t Knobs::integer(const std::string& name) const {
  int64_t v = 0;
  if (!parse_int(get(v_, name), v)) throw Error("knob '" + name + "' is not an integer: " + get(v_, name));
  return v;
}
bool Knobs::boolean(const std::string& name) const {
  const std::string& s = get(v_, name);
  if (s == "true") return true;
  if (s == "false") return false;
  throw Error("knob '" + name + "' is not a boolean: " + s);
}
const std::string& Knobs::choice(const std::string& name) const {
  return get(v_, name);
}

std::string Knobs::str() const {
  std::string s;
  for (const auto& [k, v] : v_) {
    if (!s.empty()) s += ' ';
    s += k;
    s += '=';
    s += v;
  }
  return s;
}
nlohmann::json Knobs::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : v_) j[k] = v;
  return j;
}
Knobs Knobs::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw Error("knobs: expected a JSON object");
  Knobs k;
  for (const auto& [name, v] : j.items()) k.set(name, v.is_string() ? v.get<std::string>() : v.dump());
  return k;
}

KnobSpace& KnobSpace::add_int(std::string name, std::vector<int64_t> values, int64_t def, std::string help) {
  std::sort(values.begin(), values.end());
  specs_.push_back(
      {std::move(name), KnobKind::Int, std::move(help), std::move(values), {}, std::to_string(def)});
  return *this;
}
KnobSpace& KnobSpace::add_bool(std::string name, bool def, std::string help) {
  specs_.push_back({std::move(name), KnobKind::Bool, std::move(help), {}, {}, def ? "true" : "false"});
  return *this;
}
KnobSpace& KnobSpace::add_choice(std::string name, std::vector<std::string> choices, std::string def,
                                 std::string help) {
  specs_.push_back(
      {std::move(name), KnobKind::Choice, std::move(help), {}, std::move(choices), std::move(def)});
  return *this;
}

const KnobSpec* KnobSpace::find(const std::string& name) const {
  for (const KnobSpec& k : specs_)
    if (k.name == name) return &k;
  return nullptr;
}

Knobs KnobSpace::defaults() const {
  Knobs k;
  for (const KnobSpec& s : specs_) k.set(s.name, s.default_value);
  return k;
}

bool KnobSpec::allows(const std::string& value) const {
  int64_t iv = 0;
  switch (kind) {
    case KnobKind::Int:
      return parse_int(value, iv) && std::find(values.begin(), values.end(), iv) != values.end();
    case KnobKind::Bool:
      return value == "true" || value == "false";
    case KnobKind::Choice:
      return std::find(choices.begin(), choices.end(), value) != choices.end();
  }
  return false;
}

Knobs KnobSpace::resolve(const Knobs& partial) const {
  for (const auto& [name, v] : partial.values()) {
    const KnobSpec* s = find(name);
    if (!s) {
      std::string names;
      for (const KnobSpec& k : specs_) {
        if (!names.empty()) names += ", ";
        names += k.name;
      }
      throw Error(fmt::format("unknown knob '{}' (this track's knobs: {})", name, names));
    }
    if (!s->allows(v))
      throw Error(fmt::format("knob '{}' = '{}' is outside its space (allowed: {})", name, v, allowed(*s)));
  }
  Knobs k = defaults();
  for (const auto& [name, v] : partial.values()) k.set(name, v);
  return k;
}

nlohmann::json KnobSpace::to_json() const {
  nlohmann::json a = nlohmann::json::array();
  for (const KnobSpec& s : specs_) {
    nlohmann::json j{{"name", s.name}, {"help", s.help}, {"default", s.default_value}};
    j["kind"] = s.kind == KnobKind::Int ? "int" : s.kind == KnobKind::Bool ? "bool" : "choice";
    if (s.kind == KnobKind::Int) j["values"] = s.values;
    if (s.kind == KnobKind::Choice) j["choices"] = s.choices;
    a.push_back(std::move(j));
  }
  return a;
}

}  // namespace cake::tracks
