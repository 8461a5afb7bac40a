// The JSON-Schema subset of skills/schema.h: each keyword accepts what conforms and names what does not.
#include "skills/schema.h"

#include <gtest/gtest.h>

namespace {

using cake::skills::schema_errors;
using nlohmann::json;

const json kSchema = R"({
  "type": "object", "additionalProperties": false, "required": ["name", "size"],
  "properties": {
    "name": { "type": "string" },
    "size": { "type": "integer", "minimum": 1, "maximum": 8 },
    "ratio": { "type": "number" },
    "mode": { "enum": ["fast", "exact"] },
    "either": { "type": ["string", "null"] },
    "knobs": { "type": "object", "additionalProperties": { "type": "string" } },
    "list": { "type": "array", "items": { "type": "boolean" } } } })"_json;

TEST(SchemaTest, ConformingValuesHaveNoErrors) {
  EXPECT_TRUE(schema_errors(kSchema, {{"name", "a"}, {"size", 3}}).empty());
  EXPECT_TRUE(schema_errors(kSchema, {{"name", "a"},
                                      {"size", 8},
                                      {"ratio", 2},  // an integer is a number
                                      {"mode", "exact"},
                                      {"either", nullptr},
                                      {"knobs", {{"tile", "4"}}},
                                      {"list", {true, false}}})
                  .empty());
}

TEST(SchemaTest, EachBreachIsNamedWithItsPath) {
  const auto e = schema_errors(kSchema, {{"size", 9},
                                         {"ratio", "x"},
                                         {"mode", "slow"},
                                         {"either", 1},
                                         {"knobs", {{"tile", 4}}},
                                         {"list", {true, 1}},
                                         {"extra", 0}});
  const auto has = [&](const std::string& text) {
    for (const std::string& s : e)
      if (s == text) return true;
    ADD_FAILURE() << "missing: " << text;
    return false;
  };
  has("/: missing required property 'name'");
  has("/size: 9 is above the maximum 8");
  has("/ratio: expected number, got string");
  has(R"(/mode: "slow" is not one of ["fast","exact"])");
  has(R"(/either: expected ["string","null"], got integer)");
  has("/knobs/tile: expected string, got integer");
  has("/list/1: expected boolean, got integer");
  has("/: unknown property 'extra'");
  EXPECT_EQ(e.size(), 8u);
}

TEST(SchemaTest, BelowTheMinimumAndNotAnObject) {
  EXPECT_EQ(schema_errors(kSchema, {{"name", "a"}, {"size", 0}}),
            std::vector<std::string>{"/size: 0 is below the minimum 1"});
  EXPECT_EQ(schema_errors(kSchema, json::array()), std::vector<std::string>{"/: expected object, got array"});
}

}  // namespace
