// In-process conformance check of a kernel against the reference interpreter (see conformance.h).
#include "eval/conformance.h"

#include <fmt/format.h>

#include "core/error.h"
#include "reference/reference.h"

namespace cake::eval {

std::string CaseOutcome::str() const {
  std::string s = fmt::format("{:<12} {:<5} {}", id, pass ? "pass" : "FAIL", describe);
  if (!error.empty()) return s + "  " + error;
  for (const GateResult& g : outputs)
    if (!g.pass) s += "  " + g.str();
  return s;
}

std::vector<CaseOutcome> check_kernel(const build::Kernel& k, const CheckedContract& c, cases::Set set,
                                      const std::function<void(const CaseOutcome&)>& progress) {
  std::vector<CaseOutcome> out;
  for (const cases::Case& kc : cases::make_cases(c, set)) {
    CaseOutcome o;
    o.id = kc.id();
    o.describe = kc.describe();
    try {
      const std::vector<Tensor> want = reference::cached_outputs(c, kc);
      const std::vector<Tensor> got = build::run_case(k, c, kc);
      o.pass = true;
      for (size_t i = 0; i < want.size(); ++i) {
        o.outputs.push_back(precision_gate(got[i], want[i]));
        o.pass = o.pass && o.outputs.back().pass;
      }
    } catch (const Error& e) {
      o.pass = false;
      o.error = e.what();
    }
    if (progress) progress(o);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace cake::eval
