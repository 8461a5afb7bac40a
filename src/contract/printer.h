// Prints TE trees and whole contracts back to text. print(parse(s)) re-parses to the same tree,
// and the printed form is canonical (it is what the contract hash is taken over).
#pragma once

#include <string>

#include "contract/ast.h"
#include "contract/contract.h"

namespace cake::te {

std::string print_expr(const Expr& e);
std::string print_stmt(const Stmt& s);
std::string print_program(const std::vector<Stmt>& prog);  // one statement per line

}  // namespace cake::te

namespace cake {
// The contract as canonical YAML (keys in a fixed order, TE printed canonically).
std::string print_contract(const Contract& c);
}  // namespace cake
