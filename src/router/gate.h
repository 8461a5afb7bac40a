// L0 of the router (DESIGN §7): every registered track's feasibility for this contract on this machine,
// in registry order, with the reason of each infeasible one.
#pragma once

#include <vector>

#include "contract/contract.h"
#include "router/decide.h"
#include "target/machine.h"

namespace cake::router {

std::vector<Gate> feasibility_gate(const CheckedContract& c, const target::MachineInfo& m);

// The key the abilities of this machine are kept under: "cpu-<ISA level>" (e.g. "cpu-avx2").
std::string target_key(const target::MachineInfo& m);

}  // namespace cake::router
