// The code-generation track interface (DESIGN §5) and the track registry. A track decides whether it
// can lower a checked contract on this machine (with a reason when not), publishes a typed, bounded knob
// space, and lowers (contract, knobs) to a source artifact a person can read. Building the artifact
// into a loadable kernel is the build service's job (src/build/), so every track shares its cache,
// parallel jobs, timeouts and diagnostics.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "contract/contract.h"
#include "target/machine.h"
#include "tracks/knobs.h"

namespace cake::tracks {

struct Feasibility {
  bool ok = true;
  std::string reason;  // why not (empty when ok)
  static Feasibility yes() { return {}; }
  static Feasibility no(std::string why) { return {false, std::move(why)}; }
};

// One file of an artifact, written into the build directory under `name`.
struct SourceFile {
  std::string name;
  std::string text;
};

// A command of a build recipe, run in the build directory. argv[0] is a program found on PATH, an
// absolute path, or "./x" for a program an earlier step produced.
struct BuildStep {
  std::vector<std::string> argv;
  std::string what;      // "compile", "generate", "link", ...: named in diagnostics and progress
  std::string dir = {};  // where it runs, relative to the build directory ("": the build directory itself)
};

// What lower() returns: readable sources plus the recipe that turns them into `library`, a shared
// object exporting `cake_run` with the uniform C ABI (core/kernel_abi.h, DESIGN §5).
struct Artifact {
  std::string track;
  std::string op;             // contract name
  std::string contract_hash;  // CheckedContract::hash
  Knobs knobs;                // resolved: every knob of the space has a value
  std::vector<SourceFile> files;
  std::vector<BuildStep> steps;
  std::string library = "kernel.so";
  std::string main_file;  // the file a person should read first (one of files)
};

class Track {
 public:
  virtual ~Track() = default;
  virtual std::string_view name() const = 0;
  // Whether this track can lower the contract for this machine; the reason names what is missing.
  virtual Feasibility feasible(const CheckedContract& c, const target::MachineInfo& m) const = 0;
  // The knob space for this contract; defaults() of it is the track's default configuration.
  virtual KnobSpace knobs(const CheckedContract& c, const target::MachineInfo& m) const = 0;
  // Lowers with the given knobs (resolved against knobs(): missing ones take their default, an
  // unknown knob or a value outside the space throws cake::Error). Requires feasible().ok.
  virtual Artifact lower(const CheckedContract& c, const target::MachineInfo& m, const Knobs& k) const = 0;
};

// Every registered track, in registry order (registry.cpp: one line per track).
std::span<const Track* const> all_tracks();
// The named track, or nullptr.
const Track* find_track(std::string_view name);

}  // namespace cake::tracks
