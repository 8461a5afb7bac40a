// The strategy tables of strategies.h.
#include "evolve/strategies.h"

#include <map>

namespace cake::evolve {

const std::vector<std::string>& class_knobs(char cls) {
  static const std::map<char, std::vector<std::string>> kClasses{
      {'P',
       {"vector_width",
        "tile_m",
        "tile_n",
        "unroll_k",
        "vectorize_reductions",
        "transpose_inputs",
        "mr",
        "nv",
        "unroll",
        "vectorize",
        "interchange",
        "scan",
        "gemm",
        "wg",
        "ipw",
        "reduce_wg",
        "reduce_min",
        "local_reduce",
        "row_block",
        "scatter_rows",
        "plane",
        "f16c",
        "stream",
        "stage_rows"}},
      {'F', {"stages", "fusion"}},
      {'D', {"bf16_dot", "bf16_f32", "f16_f32"}},
      {'A', {"accum_f32", "accum_lowp", "f64_elementwise", "compute", "acc"}},
      {'H', {"parallel", "task_rows", "threads", "parallel_min_work", "serial_below"}},
  };
  static const std::vector<std::string> kNone;
  auto it = kClasses.find(cls);
  return it == kClasses.end() ? kNone : it->second;
}

std::vector<char> classes_for(Bottleneck b) {
  switch (b) {
    case Bottleneck::MemoryFusableChain:
      return {'F', 'P', 'H', 'A'};
    case Bottleneck::MemoryBound:
      return {'P', 'H', 'A'};
    case Bottleneck::ComputeContraction:
      return {'P', 'D', 'A', 'H'};
    case Bottleneck::ComputeContractionChain:
      // Fused rows run the chain per output row: each row's contraction is row dot products against one
      // row of the first operand, whose sums end in a horizontal fold, and the next contraction re-reads
      // its second operand per row. Apart, each is a GEMM over packed panels (simd `fusion=none`:
      // attention bf16 S=128 T=1024 3.8 -> 2.0 ms).
      return {'F', 'P', 'D', 'A', 'H'};
    case Bottleneck::ComputeVector:
      return {'A', 'P', 'H'};
    case Bottleneck::InstructionBound:
      return {'A', 'P', 'F'};
    case Bottleneck::DivergingShapeRegimes:
      return {'H', 'P', 'F', 'A'};
  }
  return {'P'};
}

}  // namespace cake::evolve
