// The bottleneck signature of a measured kernel (DESIGN §8). This machine has no hardware counters, so
// the signature is read from where the cases sit on the roofline (arithmetic intensity against the ridge
// point, efficiency) and from how efficiency scales with case size, together with the operator's profile.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/score.h"
#include "profile/profile.h"

namespace cake::evolve {

enum class Bottleneck {
  MemoryFusableChain,       // memory-bound, with a chain of stages that could share one pass
  MemoryBound,              // memory-bound, nothing to fuse
  ComputeContraction,       // compute-bound contraction (matmul-like)
  ComputeContractionChain,  // compute-bound, a contraction consumes another's result (attention)
  ComputeVector,            // compute-bound elementwise / reduction arithmetic
  InstructionBound,         // far below both roofs on its largest cases: scalar code, overheads
  DivergingShapeRegimes,    // efficiency differs by more than 4x between the small and the large cases
};
std::string_view bottleneck_name(Bottleneck b);  // "memory-bound-fusable-chain", ...

struct Signature {
  Bottleneck bottleneck = Bottleneck::MemoryBound;
  std::string why;  // the numbers that decided
};

// From the judged cases (the evaluate skill's "cases": flops, bytes, t_cand_s, t_floor_s, verdict).
Signature signature_of(const nlohmann::json& cases, const profile::Profile& p,
                       const eval::MachinePeaks& peaks);

}  // namespace cake::evolve
