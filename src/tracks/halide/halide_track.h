// The `halide` code-generation track (DESIGN §5): TE -> Halide 14 Funcs / RDoms with a manual schedule from
// knobs (or one of Halide's autoschedulers, as peers), AOT-compiled by a generated generator program and
// wrapped in the uniform C ABI.
#pragma once

#include "tracks/track.h"

namespace cake::tracks {

class HalideTrack : public Track {
 public:
  std::string_view name() const override { return "halide"; }
  Feasibility feasible(const CheckedContract& c, const target::MachineInfo& m) const override;
  KnobSpace knobs(const CheckedContract& c, const target::MachineInfo& m) const override;
  Artifact lower(const CheckedContract& c, const target::MachineInfo& m, const Knobs& k) const override;
};

const Track& halide_track();

}  // namespace cake::tracks
