// The TE parser: a recursive-descent parser over lexer tokens producing unresolved trees.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "contract/ast.h"
#include "contract/source_map.h"

namespace cake::te {

// A whole program: one statement per line (or separated by ';').
std::vector<Stmt> parse_program(std::string_view text, const SourceMap& map);

// A single expression (size definitions, shape dimensions, constraints, distribution arguments).
ExprPtr parse_expression(std::string_view text, const SourceMap& map);

// A shape: optional dtype, then a bracketed list of size expressions: "i32[B, K]", "[N, 2*D]".
struct ShapeSpec {
  std::string dtype;  // empty when absent
  Pos dtype_pos;
  std::vector<ExprPtr> dims;
};
ShapeSpec parse_shape(std::string_view text, const SourceMap& map);

// An application "name(arg, ...)" whose name is not a TE function (value distributions).
struct Application {
  std::string name;
  Pos pos;
  std::vector<ExprPtr> args;
};
Application parse_application(std::string_view text, const SourceMap& map);

}  // namespace cake::te
