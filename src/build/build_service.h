// The build service (DESIGN §2 build/): turns a track's artifact into a loadable kernel. Builds are
// cached by content hash (sources, recipe, and the identity of every tool the recipe runs) under
// cache_dir()/build/<hash>/, shared across processes (a lock file per hash), so the same source is never
// compiled twice; several artifacts build in parallel on all cores; every step has a wall-clock limit;
// compiler output is parsed into structured diagnostics a repair step can act on.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tracks/track.h"

namespace cake::build {

// One compiler message: "file:line:col: severity: message".
struct Diagnostic {
  std::string file;  // as the tool printed it (a name inside the build directory for our sources)
  int line = 0;
  int col = 0;
  std::string severity;  // "error", "warning", "note", "fatal error"
  std::string message;
  std::string step;  // the BuildStep::what it came from
};

enum class BuildStatus { Ok, CompileError, Timeout, ToolMissing };
std::string_view status_name(BuildStatus s);  // "ok", "compile-error", "timeout", "tool-missing"

struct BuildResult {
  BuildStatus status = BuildStatus::Ok;
  bool ok() const { return status == BuildStatus::Ok; }
  std::string hash;                     // content hash of the artifact and its tools
  std::filesystem::path directory;      // cache_dir()/build/<hash>
  std::filesystem::path library;        // the built shared object (valid when ok)
  bool cache_hit = false;               // served from the cache: no tool ran
  double seconds = 0;                   // wall time of this call
  std::vector<Diagnostic> diagnostics;  // errors first, then warnings and notes
  std::string log;                      // combined tool output (trimmed to 64 KiB)
  std::string failure;                  // one line: what failed ("step 'compile' exited with 1", ...)
};

struct BuildOptions {
  double step_timeout_s = 180;                     // per step
  int jobs = 0;                                    // build_all: parallel builds; 0 = all usable cores
  std::function<void(std::string_view)> progress;  // told "built <op>/<track> (1.2 s)" etc.
};

// Builds (or finds in the cache) one artifact. Never throws for a failing build: the status says.
// Throws cake::Error only when the cache directory cannot be written.
BuildResult build(const tracks::Artifact& a, const BuildOptions& o = {});

// Builds several artifacts in parallel; results in the same order.
std::vector<BuildResult> build_all(const std::vector<tracks::Artifact>& as, const BuildOptions& o = {});

// The content hash build() would use (for tests and for naming).
std::string artifact_hash(const tracks::Artifact& a);

// Number of tool processes this process has started (a cache hit starts none).
int tool_runs();

// Parses gcc/clang-style diagnostics out of tool output.
std::vector<Diagnostic> parse_diagnostics(std::string_view output, std::string_view step = {});

}  // namespace cake::build
