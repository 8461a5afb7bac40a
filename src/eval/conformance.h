// Conformance of a built kernel against the reference on a case set, run in this process: for each case
// fresh inputs, NaN-filled outputs, the kernel, then the precision gate per output. Used by the tracks'
// tests and `cake lower --check`; the sandboxed runner of CAKE-Bench judges kernels it does not trust.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "build/kernel.h"
#include "cases/cases.h"
#include "eval/precision.h"

namespace cake::eval {

struct CaseOutcome {
  std::string id;        // "standard/3"
  std::string describe;  // "f32 N=64 D=127"
  bool pass = false;
  std::string error;                // the kernel's non-zero status, or why the reference failed
  std::vector<GateResult> outputs;  // one per contract output
  std::string str() const;          // one line
};

// Runs every case of the set (or the first `limit` when > 0); progress is told each outcome.
std::vector<CaseOutcome> check_kernel(const build::Kernel& k, const CheckedContract& c, cases::Set set,
                                      const std::function<void(const CaseOutcome&)>& progress = {});

}  // namespace cake::eval
