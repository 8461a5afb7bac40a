// The JSON-Schema subset of schema.h.
#include "skills/schema.h"

#include <fmt/format.h>

#include <algorithm>

namespace cake::skills {

namespace {

using nlohmann::json;

std::string type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "integer";
    case json::value_t::number_float:
      return "number";
    case json::value_t::string:
      return "string";
    case json::value_t::array:
      return "array";
    case json::value_t::object:
      return "object";
    default:
      return "unknown";
  }
}

bool has_type(const json& v, const std::string& t) {
  const std::string actual = type_of(v);
  return actual == t || (t == "number" && actual == "integer");
}

void check(const json& s, const json& v, const std::string& at, std::vector<std::string>& errors) {
  const std::string where = at.empty() ? "/" : at;
  if (auto t = s.find("type"); t != s.end()) {
    const json types = t->is_array() ? *t : json::array({*t});
    if (std::none_of(types.begin(), types.end(),
                     [&](const json& n) { return has_type(v, n.get<std::string>()); })) {
      errors.push_back(fmt::format("{}: expected {}, got {}", where,
                                   t->is_array() ? t->dump() : t->get<std::string>(), type_of(v)));
      return;
    }
  }
  if (auto e = s.find("enum"); e != s.end() && std::find(e->begin(), e->end(), v) == e->end())
    errors.push_back(fmt::format("{}: {} is not one of {}", where, v.dump(), e->dump()));
  if (v.is_number()) {
    if (auto lo = s.find("minimum"); lo != s.end() && v.get<double>() < lo->get<double>())
      errors.push_back(fmt::format("{}: {} is below the minimum {}", where, v.dump(), lo->dump()));
    if (auto hi = s.find("maximum"); hi != s.end() && v.get<double>() > hi->get<double>())
      errors.push_back(fmt::format("{}: {} is above the maximum {}", where, v.dump(), hi->dump()));
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>()))
        errors.push_back(fmt::format("{}: missing required property '{}'", where, r.get<std::string>()));
    }
    const auto extra = s.find("additionalProperties");
    for (const auto& [k, item] : v.items()) {
      if (auto p = props.find(k); p != props.end()) {
        check(*p, item, at + "/" + k, errors);
      } else if (extra != s.end() && extra->is_boolean() && !extra->get<bool>()) {
        errors.push_back(fmt::format("{}: unknown property '{}'", where, k));
      } else if (extra != s.end() && extra->is_object()) {
        check(*extra, item, at + "/" + k, errors);
      }
    }
  }
  if (v.is_array()) {
    if (auto items = s.find("items"); items != s.end())
      for (size_t i = 0; i < v.size(); ++i) check(*items, v[i], fmt::format("{}/{}", at, i), errors);
  }
}

}  // namespace

std::vector<std::string> schema_errors(const nlohmann::json& schema, const nlohmann::json& value) {
  std::vector<std::string> errors;
  check(schema, value, "", errors);
  return errors;
}

}  // namespace cake::skills
