// The error types every part throws: a base cake::Error and the located ContractError
// (file:line:col, message, hint) that malformed contracts produce.
#pragma once

#include <stdexcept>
#include <string>

namespace cake {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A position in a source file; line and column are 1-based, 0 when unknown.
struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;
  std::string str() const;  // "file:line:col"
};

class ContractError : public Error {
 public:
  ContractError(SourceLoc loc, std::string message, std::string hint = {});
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

 private:
  SourceLoc loc_;
  std::string message_;
  std::string hint_;
};

}  // namespace cake
