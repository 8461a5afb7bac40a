// Running a build tool as a child process: its own process group, output captured to a file, a
// wall-clock limit after which the whole group is killed.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace cake::build {

struct ProcessResult {
  bool started = false;  // false: the program was not found or could not be executed
  bool timed_out = false;
  int exit_code = -1;  // valid when it exited
  int signal = 0;      // the signal that ended it, 0 if none
  double seconds = 0;
};

// Runs argv in `dir`, appending stdout and stderr to `log`. Never throws.
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& dir,
                          const std::filesystem::path& log, double timeout_s);

}  // namespace cake::build
