// L0 over the track registry.
#include "router/gate.h"

#include "tracks/track.h"

namespace cake::router {

std::vector<Gate> feasibility_gate(const CheckedContract& c, const target::MachineInfo& m) {
  std::vector<Gate> gates;
  for (const tracks::Track* t : tracks::all_tracks()) {
    const tracks::Feasibility f = t->feasible(c, m);
    gates.push_back({std::string(t->name()), f.ok, f.reason});
  }
  return gates;
}

std::string target_key(const target::MachineInfo& m) {
  return "cpu-" + m.isa.level();
}

}  // namespace cake::router
