// Maps positions inside a YAML scalar (the TE program, a size expression) back to the contract
// file, so that every TE error names the file's own line and column.
#pragma once

#include <string>
#include <vector>

#include "contract/ast.h"
#include "core/error.h"

namespace cake {

struct SourceMap {
  std::string file;
  std::vector<te::Pos> line_start;  // file position of column 1 of each line of the scalar text

  // A 1-based (line, col) inside the scalar text to a position in the file.
  te::Pos map(int line, int col) const;
  SourceLoc loc(te::Pos p) const { return {file, p.line, p.col}; }
  static SourceMap single(std::string file, te::Pos start);
};

[[noreturn]] void fail_at(const std::string& file, te::Pos p, std::string msg, std::string hint = {});

}  // namespace cake
