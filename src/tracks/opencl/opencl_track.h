// The `opencl` code-generation track (DESIGN §5): SIMT lowering of a checked contract to OpenCL C (one
// kernel per TE statement, one work-item per output element, reductions as loops or as work-group tree
// reductions in local memory) plus a C++ host (host.cpp) that runs the kernels through the OpenCL ICD
// behind the uniform C ABI. The build recipe checks kernel.cl offline with `cake-oclc` first, so OpenCL C
// errors come back as structured `kernel.cl:LINE:COL: error:` diagnostics at build time.
#pragma once

#include "tracks/track.h"

namespace cake::tracks {

class OpenclTrack : public Track {
 public:
  std::string_view name() const override { return "opencl"; }
  Feasibility feasible(const CheckedContract& c, const target::MachineInfo& m) const override;
  KnobSpace knobs(const CheckedContract& c, const target::MachineInfo& m) const override;
  Artifact lower(const CheckedContract& c, const target::MachineInfo& m, const Knobs& k) const override;
};

const Track& opencl_track();

namespace opencl {

// Path of the offline OpenCL C checker built with CAKE (cake-oclc).
std::string oclc_path();

// The kernel-side settings lower() takes from the resolved knobs.
struct Settings {
  int wg = 0;   // work-group size of elementwise / per-row kernels (0: the runtime chooses)
  int ipw = 1;  // output elements per work-item
  int vec = 1;  // vector width of the elementwise path
  std::string local_reduce = "auto";  // off | on | auto: work-group tree reduction per output element
  int reduce_wg = 64;                 // work-group size of the tree reduction (power of two)
  int reduce_min = 256;               // auto: use the tree reduction when a row is at least this long
  bool acc_f64 = true;                // acc_t is double where the device has cl_khr_fp64 (else float)
  bool all_acc = false;               // every float operation and intermediate in acc_t, not only reductions
};

// What the host needs to know about each kernel of the generated program (internal to the track).
struct KernelPlan {
  enum Kind { Map, MapWg, Scatter, Store } kind = Map;
  std::string name;     // OpenCL kernel function name
  int stmt = -1;        // statement index (Map / MapWg / Scatter), -1 for Store
  int tensor = -1;      // Store: the accumulated output tensor id
  std::string items;    // C++ expression (over s_<size>) for the number of domain points / owners
                        // (Map with rows set: the extent of the last domain axis, NDRange axis 0)
  std::string rows;     // Map: product of the other domain extents (NDRange axis 1); empty: 1-D
  std::string red_len;  // MapWg: C++ expression for the longest reduction of the statement
  int group = 0;        // MapWg: work-group size
};

struct TensorPlan {
  bool scratch = false;      // has a device scratch buffer (intermediate, or output read later / accumulated)
  std::string scratch_type;  // "float", "long" or "acc_t"
  bool accumulated = false;  // target of a '+=' statement
};

struct Plan {
  std::vector<TensorPlan> tensors;  // by tensor id
  std::vector<KernelPlan> kernels;  // in enqueue order; a MapWg follows the Map of the same statement
  std::string source;               // kernel.cl
};

// Builds kernel.cl and the plan. Throws cake::Error for constructs the track does not lower.
Plan plan_kernels(const CheckedContract& c, const Settings& s);

// host.cpp for the plan.
std::string emit_host(const CheckedContract& c, const Settings& s, const Plan& p);

}  // namespace opencl
}  // namespace cake::tracks
