// The halide track (halide_track.h): feasibility, the knob space, and the artifact (generator, wrapper,
// export map, build recipe).
#include "tracks/halide/halide_track.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "cases/cases.h"
#include "core/error.h"
#include "tracks/common/host_code.h"
#include "tracks/halide/halide_lower.h"

namespace cake::tracks {
namespace {

constexpr const char* kHalideInclude = "/usr/include/halide14";
constexpr const char* kHalideLib = "/usr/lib/x86_64-linux-gnu/libHalide14.so.0";
constexpr const char* kPluginDir = "/usr/lib/x86_64-linux-gnu/halide14";

int default_vector_width(const target::MachineInfo& m) {
  if (m.isa.avx512f) return 16;
  if (m.isa.avx2 || m.isa.avx) return 8;
  return 4;
}

// Every size symbol of the largest standard case (by bytes): the autoschedulers' estimates.
std::vector<int64_t> estimate_sizes(const CheckedContract& c) {
  std::vector<int64_t> best(c.sizes.size(), 1);
  try {
    double most = -1;
    for (const cases::Case& k : cases::make_cases(c, cases::Set::Standard)) {
      double b = cases::case_bytes(c, k);
      if (b > most) {
        most = b;
        best = k.sizes;
      }
    }
  } catch (const std::exception&) {
  }
  return best;
}

}  // namespace

Feasibility HalideTrack::feasible(const CheckedContract& c, const target::MachineInfo& m) const {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(kHalideInclude) / "Halide.h") || !fs::exists(kHalideLib)) {
    return Feasibility::no("Halide 14 is not installed (needs libhalide14-0-dev: " +
                           std::string(kHalideInclude) + "/Halide.h and " + kHalideLib + ")");
  }
  if (auto why = halide::unsupported(c)) return Feasibility::no(*why);
  return Feasibility::yes();
}

KnobSpace HalideTrack::knobs(const CheckedContract& c, const target::MachineInfo& m) const {
  KnobSpace s;
  s.add_choice(
      "schedule", {"manual", "adams2019", "li2018", "mullapudi2016"}, "manual",
      "manual: CAKE's schedule from these knobs; otherwise Halide's autoscheduler plugin of that name");
  s.add_int("vector_width", {1, 4, 8, 16, 32}, default_vector_width(m), "f32 lanes of every vectorized loop");
  s.add_bool("parallel", m.logical_cores > 1,
             "parallel loop over the rows (outermost pure variables) of each root stage");
  s.add_int("task_rows", {0, 1, 4, 16, 64, 256}, 0,
            "rows per parallel task; 0: about 32K elements of work per task");
  s.add_int("tile_m", {1, 2, 4, 6, 8}, 6, "register tile of contractions: rows (the reuse variable)");
  s.add_int("tile_n", {1, 2, 3, 4}, 2, "register tile of contractions: vectors along the innermost variable");
  s.add_int("unroll_k", {1, 2, 4}, 1, "unroll of the innermost reduction loop inside a register tile");
  s.add_choice("stages", {"auto", "inline", "at_row", "root"}, "auto",
               "intermediate stages: auto (inline, or at the row loop when costly and read twice), inline, "
               "at_row, root");
  s.add_bool("vectorize_reductions", true, "split reductions along a contiguous axis into vector lanes");
  s.add_bool("transpose_inputs", true,
             "store an input transposed when a contraction vectorizes its non-last axis");
  s.add_choice("accum_f32", {"f64", "f32"}, "f64", "accumulator of sums when the I/O dtype is f32");
  s.add_choice("accum_lowp", {"f32", "f64"}, "f32", "accumulator of sums when the I/O dtype is bf16 or f16");
  s.add_bool(
      "f64_elementwise", true,
      "f32 I/O: elementwise arithmetic in f64 (no cancellation error near zero; exp / erf / tanh stay f32)");
  // Without it Halide lets LLVM assume no NaN and no infinity: a contract whose values become NaN or
  // infinite inside the computation (abs(x) / x at 0, x * inf) gets finite values where the reference has
  // NaN; the gate names that (nan-position) and the debug skill's repair turns this on. Off by default: it
  // also forbids fused multiply-adds.
  s.add_bool("strict_float", false,
             "IEEE semantics for every float operation (Halide's StrictFloat): NaNs and infinities kept, no "
             "fused multiply-adds");
  (void)c;
  return s;
}

Artifact HalideTrack::lower(const CheckedContract& c, const target::MachineInfo& m, const Knobs& k) const {
  const KnobSpace space = knobs(c, m);
  const Knobs r = space.resolve(k);
  halide::Options o;
  o.schedule = r.choice("schedule");
  o.vector_width = static_cast<int>(r.integer("vector_width"));
  o.parallel = r.boolean("parallel");
  o.task_rows = static_cast<int>(r.integer("task_rows"));
  o.tile_m = static_cast<int>(r.integer("tile_m"));
  o.tile_n = static_cast<int>(r.integer("tile_n"));
  o.unroll_k = static_cast<int>(r.integer("unroll_k"));
  o.stages = r.choice("stages");
  o.vectorize_reductions = r.boolean("vectorize_reductions");
  o.transpose_inputs = r.boolean("transpose_inputs");
  o.accum_f64_f32io = r.choice("accum_f32") == "f64";
  o.accum_f64_lowp = r.choice("accum_lowp") == "f64";
  o.f64_elementwise = r.boolean("f64_elementwise");
  o.strict_float = r.boolean("strict_float");
  o.cpu_has_avx512fp16 = m.isa.avx512fp16;
  o.machine = (m.cpu_model.empty() ? std::string("cpu") : m.cpu_model) + ", " + m.isa.level();

  Artifact a;
  a.track = std::string(name());
  a.op = c.contract.name;
  a.contract_hash = c.hash;
  a.knobs = r;
  a.main_file = "pipeline.cpp";
  a.files.push_back({"pipeline.cpp", halide::pipeline_source(c, o, estimate_sizes(c))});
  a.files.push_back({"wrapper.cpp", halide::wrapper_source(c)});
  a.files.push_back(exports_map());
  for (SourceFile& f : prelude_files()) a.files.push_back(std::move(f));
  a.steps.push_back({{"g++", "-std=c++17", "-O0", "-w", std::string("-I") + kHalideInclude, "pipeline.cpp",
                      "-o", "gen", kHalideLib, "-lpthread", "-ldl"},
                     "compile-generator"});
  a.steps.push_back({{"./gen"}, "generate"});
  a.steps.push_back({{"g++", "-std=c++17", "-O2", "-fPIC", std::string("-I") + kHalideInclude, "-I.", "-c",
                      "wrapper.cpp", "-o", "wrapper.o"},
                     "compile"});
  std::vector<std::string> link = {"g++", "-shared", "-fPIC", "-o", a.library, "wrapper.o"};
  for (DType d : c.contract.dtypes) link.push_back(halide::pipeline_function(d) + ".o");
  link.insert(link.end(),
              {"halide_runtime.o", "-Wl,--version-script=exports.map", "-lpthread", "-ldl", "-lm"});
  a.steps.push_back({link, "link"});
  (void)kPluginDir;
  return a;
}

const Track& halide_track() {
  static const HalideTrack t;
  return t;
}

}  // namespace cake::tracks
