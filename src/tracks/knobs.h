// Typed, bounded knob spaces for the tracks (DESIGN §5): integer knobs over an explicit list of allowed
// values, booleans and named choices. Knob values travel as a name → value map (`Knobs`) that prints
// and hashes deterministically, so artifacts, traces and the evolution search can record them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cake::tracks {

enum class KnobKind { Int, Bool, Choice };

struct KnobSpec {
  std::string name;
  KnobKind kind = KnobKind::Int;
  std::string help;                  // one line: what the knob changes in the generated code
  std::vector<int64_t> values;       // Int: allowed values, ascending
  std::vector<std::string> choices;  // Choice: allowed names
  std::string default_value;         // as text: "64", "true", "rows"

  bool allows(const std::string& value) const;  // the value (as text) is in this knob's space
};

// A knob assignment: knob name → value as text ("64", "true", "welford").
class Knobs {
 public:
  Knobs() = default;
  Knobs(std::initializer_list<std::pair<const std::string, std::string>> kv) : v_(kv) {}

  void set(const std::string& name, std::string value) { v_[name] = std::move(value); }
  void set(const std::string& name, int64_t value) { v_[name] = std::to_string(value); }
  bool has(const std::string& name) const { return v_.count(name) != 0; }
  // Typed reads; throw cake::Error when the knob is absent or not of that type.
  int64_t integer(const std::string& name) const;
  bool boolean(const std::string& name) const;
  const std::string& choice(const std::string& name) const;

  const std::map<std::string, std::string>& values() const { return v_; }
  std::string str() const;  // "a=1 b=rows" in name order
  nlohmann::json to_json() const;
  static Knobs from_json(const nlohmann::json& j);  // throws cake::Error on a non-object
  bool operator==(const Knobs&) const = default;

 private:
  std::map<std::string, std::string> v_;
};

class KnobSpace {
 public:
  KnobSpace& add_int(std::string name, std::vector<int64_t> values, int64_t def, std::string help);
  KnobSpace& add_bool(std::string name, bool def, std::string help);
  KnobSpace& add_choice(std::string name, std::vector<std::string> choices, std::string def,
                        std::string help);

  const std::vector<KnobSpec>& specs() const { return specs_; }
  const KnobSpec* find(const std::string& name) const;
  Knobs defaults() const;
  // Fills missing knobs with defaults and checks every value; throws cake::Error naming the knob and
  // its allowed values on an unknown knob or a value outside the space.
  Knobs resolve(const Knobs& partial) const;
  nlohmann::json to_json() const;

 private:
  std::vector<KnobSpec> specs_;
};

}  // namespace cake::tracks
