// A small JSON-Schema validator for the skills' typed inputs and outputs (DESIGN §2): the subset the
// schemas here use — type (one name or a list), properties, required, additionalProperties: false,
// items, enum, minimum, maximum. An unknown keyword is ignored, as JSON Schema itself does.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cake::skills {

// Every way `value` breaks `schema`, each as "<json pointer>: <what>" ("/knobs/tile_m: expected string,
// got number"). Empty when it conforms.
std::vector<std::string> schema_errors(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace cake::skills
