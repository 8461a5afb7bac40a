// Every malformed contract gets a ContractError naming the exact line:col and saying what is
// wrong; none crashes or hangs. One case per mistake a user can make.
#include <gtest/gtest.h>

#include <string>

#include "contract/contract.h"
#include "core/error.h"

namespace cake {
namespace {

struct Bad {
  const char* name;
  std::string text;
  int line, col;
  const char* message;  // a substring of the error message
};

// A valid contract with one placeholder line per section, so each case changes one thing.
std::string contract(const std::string& compute = "y[i] = x[i]", const std::string& inputs = "{ x: [N] }",
                     const std::string& outputs = "{ y: [N] }", const std::string& extra = "",
                     const std::string& shapes = "{ N: [1, 7] }") {
  return "name: op\n"                          // 1
         "level: 1\n"                          // 2
         "dtypes: [f32]\n"                     // 3
         "inputs: " + inputs + "\n"            // 4
         "outputs: " + outputs + "\n"          // 5
         "compute: |\n"                        // 6
         "  " + compute + "\n"                 // 7 (column 3 is the first TE character)
         "cases:\n"                            // 8
         "  standard: { shapes: " + shapes + " }\n" +  // 9
         extra;                                // 10...
}

const Bad kBad[] = {
    // YAML structure
    {"yaml_syntax", "name: op\nlevel: [1\n", 3, 1, "malformed YAML"},
    {"not_a_mapping", "- a\n- b\n", 1, 1, "a contract is a YAML mapping"},
    {"unknown_key", contract() + "colour: red\n", 10, 1, "unknown key 'colour'"},
    {"missing_name", "level: 1\ndtypes: [f32]\n", 1, 1, "missing required key 'name'"},
    {"bad_name", "name: Op-1\nlevel: 1\n", 1, 7, "invalid operator name 'Op-1'"},
    {"level_range", "name: op\nlevel: 9\n", 2, 8, "level must be 1..4"},
    {"level_not_int", "name: op\nlevel: two\n", 2, 8, "the level must be an integer"},
    {"unknown_dtype", "name: op\nlevel: 1\ndtypes: [f32, f8]\n", 3, 15, "unknown dtype 'f8'"},
    {"duplicate_dtype", "name: op\nlevel: 1\ndtypes: [f32, f32]\n", 3, 15, "dtype 'f32' listed twice"},
    {"shape_not_list", contract("y[i] = x[i]", "{ x: 5 }"), 4, 14, "expected '[' to start the shape"},
    {"shape_dtype", contract("y[i] = x[i]", "{ x: \"f9[N]\" }"), 4, 15, "unknown dtype 'f9'"},
    {"nested_too_deep", "name: " + std::string(40, '[') + "\n", 1, 39, "nested more than 32 deep"},
    {"nul_byte", std::string("name: op\n\0x", 11), 2, 1, "NUL byte"},
    // TE syntax
    {"bad_character", contract("y[i] = x[i] $ 2"), 7, 15, "unexpected character '$'"},
    {"missing_equals", contract("y[i] x[i]"), 7, 8, "expected '=' or '+='"},
    {"unclosed_paren", contract("y[i] = (x[i] + 1"), 7, 19, "expected ')' to close '('"},
    {"unknown_function", contract("y[i] = frob(x[i])"), 7, 10, "unknown function 'frob'"},
    {"function_arity", contract("y[i] = exp(x[i], 2)"), 7, 10, "'exp' takes 1 argument, given 2"},
    {"reduction_over_nothing_syntax", contract("y[i] = x[i] + sum(: x[i])"), 7, 21, "reduction 'sum' over nothing"},
    {"reduction_empty_range", contract("y[i] = x[i] + sum(k in 3..3: x[k])"), 7, 21, "reduction over nothing"},
    {"malformed_number", contract("y[i] = x[i] * 1e"), 7, 17, "malformed number"},
    {"cast_unknown_type", contract("y[i] = cast<f8>(x[i])"), 7, 15, "unknown dtype 'f8' in cast"},
    {"trailing_garbage", contract("y[i] = x[i] x[i]"), 7, 15, "expected end of line"},
    // names and shapes
    {"unknown_name", contract("y[i] = x[i] * alpha"), 7, 17, "unknown name 'alpha'"},
    {"unknown_tensor", contract("y[i] = z[i]"), 7, 10, "unknown tensor 'z'"},
    {"wrong_read_arity", contract("y[i] = x[i, i]"), 7, 10, "'x' has rank 1 but is read with 2 indices"},
    {"wrong_lhs_arity", contract("y[i, j] = x[i]"), 7, 3, "'y' has rank 1 but is indexed with 2 variables"},
    {"unbound_size_symbol", contract("y[i] = x[i]", "{ x: [N], w: [K] }"), 4, 23, "unbound size symbol 'K'"},
    {"index_out_of_range", contract("y[i] = x[i + 1]"), 7, 12, "index i + 1 reads 'x' axis 0 over 1..1, outside 0..0"},
    {"shape_mismatch", contract("y[i] = x[i]", "{ x: [N] }", "{ y: [M] }", "", "{ N: [1, 7], M: [8] }"), 7, 12,
     "index i reads 'x' axis 0 over 0..7, outside 0..0"},
    {"float_index", contract("y[i] = x[i * 0.5]"), 7, 12, "index of 'x' must be an integer expression"},
    {"assign_to_input", contract("x[i] = y[i]"), 7, 3, "cannot assign to input 'x'"},
    {"output_never_defined", contract("t[i] = x[i]"), 5, 12, "output 'y' is never defined"},
    {"defined_twice", contract("y[i] = x[i]; y[i] = x[i] * 2"), 7, 16, "'y' is defined twice"},
    {"cyclic_definition",
     contract("a[i] = b[i] + x[i]; b[i] = a[i] * 2; y[i] = a[i]"), 7, 3, "cyclic definition: a -> b -> a"},
    {"self_reference", contract("y[i] = y[i] + x[i]"), 7, 10, "cyclic definition: 'y' reads itself"},
    {"cannot_infer_reduction", contract("y[i] = x[i] + sum(k: 1.0)"), 7, 21, "reduction variable 'k' is not used"},
    {"cannot_infer_extent", contract("t[i, j] = x[i] * 2.0; y[i] = t[i, 0]"), 7, 8, "cannot infer the extent of 'j'"},
    {"var_shadows_size", contract("y[N] = x[N]"), 7, 5, "index variable 'N' shadows a size symbol"},
    {"int_output_from_float", contract("y[i] = x[i] * 0.5", "{ x: [N] }", "{ y: \"i32[N]\" }"), 7, 10,
     "'y' is i32 but its definition is a float expression"},
    {"scatter_into_unknown", contract("t[x2[i]] += 1.0; y[i] = x[i]"), 7, 3, "cannot accumulate into 't'"},
    {"unbounded_scatter_index", contract("y[i] = x[i]; y[i + 2] += x[i]"), 7, 18, "writes to 'y' axis 0"},
    // sizes, cases, values
    {"cyclic_size", contract() + "sizes: { A: B + 1, B: A * 2 }\n", 10, 10, "cyclic definition of size 'A'"},
    {"size_uses_tensor", contract() + "sizes: { M: \"x[0]\" }\n", 10, 14, "may use only size symbols"},
    {"case_rule_unknown_symbol", contract("y[i] = x[i]", "{ x: [N] }", "{ y: [N] }", "", "{ N: [1], Q: [2] }"), 9, 33,
     "case rule for 'Q', which the contract never uses"},
    {"empty_range", contract("y[i] = x[i]", "{ x: [N] }", "{ y: [N] }", "", "{ N: \"9..3\" }"), 9, 28,
     "empty range '9..3'"},
    {"values_unknown_tensor", contract() + "values: {}\n", 10, 1, "unknown key 'values'"},
    {"distribution_unknown",
     "name: op\nlevel: 1\ndtypes: [f32]\ninputs: { x: [N] }\noutputs: { y: [N] }\ncompute: |\n  y[i] = x[i]\n"
     "cases:\n  standard: { shapes: { N: [1, 7] } }\n  values: { x: gauss(0, 1) }\n",
     10, 16, "unknown distribution 'gauss'"},
    {"distribution_arity",
     "name: op\nlevel: 1\ndtypes: [f32]\ninputs: { x: [N] }\noutputs: { y: [N] }\ncompute: |\n  y[i] = x[i]\n"
     "cases:\n  standard: { shapes: { N: [1, 7] } }\n  values: { x: normal(0) }\n",
     10, 16, "'normal' takes 2 arguments, given 1"},
    {"values_for_output",
     "name: op\nlevel: 1\ndtypes: [f32]\ninputs: { x: [N] }\noutputs: { y: [N] }\ncompute: |\n  y[i] = x[i]\n"
     "cases:\n  standard: { shapes: { N: [1, 7] } }\n  values: { y: normal(0, 1) }\n",
     10, 13, "values given for 'y', which is not an input"},
    {"index_input_without_rule",
     contract("y[i] = x[ids[i]]", "{ x: [N], ids: \"i64[N]\" }"), 4, 19, "index input 'ids' has no value rule"},
    {"constraints_unsatisfiable", contract() + "constraints: [N > 100]\n", 10, 15,
     "no combination of the case rules' extreme sizes satisfies the constraints"},
    {"bad_baseline", contract() + "baseline: numpy\n", 10, 11, "unknown baseline 'numpy'"},
    {"count_range", contract("y[i] = x[i]", "{ x: [N] }", "{ y: [N] }", "", "{ N: [1] }, count: 0"), 9, 42,
     "count must be 1..10000"},
};

class MalformedContract : public ::testing::TestWithParam<Bad> {};

TEST_P(MalformedContract, NamesLineColumnAndCause) {
  const Bad& b = GetParam();
  try {
    check_contract(load_contract_text(b.text, "bad.yaml"));
    FAIL() << "accepted a malformed contract:\n" << b.text;
  } catch (const ContractError& e) {
    EXPECT_EQ(e.loc().file, "bad.yaml");
    EXPECT_EQ(e.loc().line, b.line) << e.what();
    EXPECT_EQ(e.loc().col, b.col) << e.what();
    EXPECT_NE(e.message().find(b.message), std::string::npos) << "message: " << e.message();
    EXPECT_NE(std::string(e.what()).find("bad.yaml:" + std::to_string(b.line) + ":" + std::to_string(b.col)),
              std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Contract, MalformedContract, ::testing::ValuesIn(kBad),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MalformedContract, AtLeastThirtyDistinctMistakes) { EXPECT_GE(std::size(kBad), 30u); }

TEST(MalformedContract, MissingFileIsAContractError) {
  EXPECT_THROW(load_contract_file("/nonexistent/op.yaml"), ContractError);
}

TEST(MalformedContract, ErrorsCarryAHint) {
  try {
    check_contract(load_contract_text(contract("y[i] = x[i + 1]"), "bad.yaml"));
    FAIL();
  } catch (const ContractError& e) {
    EXPECT_NE(e.hint().find("x?["), std::string::npos) << e.hint();
  }
}

}  // namespace
}  // namespace cake
