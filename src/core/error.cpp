// Formatting of located errors: "file:line:col: error: message (hint: ...)".
#include "core/error.h"

namespace cake {

std::string SourceLoc::str() const {
  std::string s = file.empty() ? "<input>" : file;
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(col);
  return s;
}

namespace {
std::string format(const SourceLoc& loc, const std::string& msg, const std::string& hint) {
  std::string s = loc.str() + ": error: " + msg;
  if (!hint.empty()) s += "\n  hint: " + hint;
  return s;
}
}  // namespace

ContractError::ContractError(SourceLoc loc, std::string message, std::string hint)
    : Error(format(loc, message, hint)), loc_(std::move(loc)), message_(std::move(message)),
      hint_(std::move(hint)) {}

}  // namespace cake
