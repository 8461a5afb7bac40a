// Scalar-text to file position mapping and the located-error helper.
#include "contract/source_map.h"

namespace cake {

te::Pos SourceMap::map(int line, int col) const {
  if (line_start.empty()) return {line, col};
  size_t i = static_cast<size_t>(line < 1 ? 1 : line) - 1;
  if (i >= line_start.size()) i = line_start.size() - 1;
  return {line_start[i].line, line_start[i].col + col - 1};
}

SourceMap SourceMap::single(std::string file, te::Pos start) {
  SourceMap m;
  m.file = std::move(file);
  m.line_start.push_back(start);
  return m;
}

void fail_at(const std::string& file, te::Pos p, std::string msg, std::string hint) {
  throw ContractError(SourceLoc{file, p.line, p.col}, std::move(msg), std::move(hint));
}

}  // namespace cake
