// The generation controller with the built-in policy (DESIGN §1, Generation mode): the first correct
// kernel for a contract, acting only through skills. describe routes the contract; the chosen track (then
// the router's contenders, then the other feasible tracks by predicted score) is lowered, built and judged
// on the standard cases; a failed build or failed case goes to debug, whose repairs are tried in turn
// within a bounded number of attempts before the next track. Every correct kernel is then timed against the
// baseline; the best score wins, and each timed (operator, track) score is recorded for the router (L3).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "skills/judge.h"

namespace cake::agents {

struct GenerationOptions {
  std::string track;                                      // only this track (empty: the router's order)
  nlohmann::json start_knobs = nlohmann::json::object();  // the first attempt's knobs (the rest: defaults)
  int max_attempts = 8;                                   // lower + judge cycles over all tracks
  bool explore = true;  // also judge the contenders the router names (DESIGN §7 explore rule)
  bool record = true;   // record timed outcomes for the router and refit it
  std::function<void(const std::string&)> log;  // told one line per attempt (a terminal's progress)
};

struct Attempt {
  std::string track;
  nlohmann::json knobs;
  int64_t candidate = 0;
  std::string why;      // why this attempt: "router's choice (deciding: ...)", a repair's reason, ...
  std::string outcome;  // "correct", "build-failed: ...", "3 of 20 cases fail: ...", "invalid: ..."
  double seconds = 0;   // lower + build + judge
};

struct GenerationResult {
  bool ok = false;
  std::string operator_name;
  std::string why_none;        // when !ok: every track's last reason
  nlohmann::json description;  // the describe skill's output (profile, routing)
  std::vector<Attempt> attempts;
  nlohmann::json best;  // evaluate's timed output for the best correct kernel (score, cases, ...)
  std::string best_track;
  nlohmann::json best_knobs;
  std::string library;  // the best kernel's shared object
  double seconds_to_first_correct = -1;
  double seconds = 0;
};

// Runs the controller on the contract at `file` under the session's run (started here when there is none).
// Never throws for what a kernel does; throws cake::Error only when the store cannot be written.
GenerationResult generate(skills::Session& s, const std::string& file, const GenerationOptions& o = {});

// The result as one JSON document (what `cake generate --json` prints).
nlohmann::json to_json(const GenerationResult& r);

}  // namespace cake::agents
