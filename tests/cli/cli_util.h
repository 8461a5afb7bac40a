// Runs the built `cake` binary with arguments and captures its stdout and exit code.
#pragma once

#include <string>

struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& args);
