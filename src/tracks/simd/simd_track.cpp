// The simd track: feasibility, knob space and lowering to a C++ artifact built by g++.
#include "tracks/simd/simd_track.h"

#include <fmt/format.h>

#include <algorithm>

#include "contract/printer.h"
#include "core/error.h"
#include "tracks/common/host_code.h"
#include "tracks/simd/cpp_expr.h"
#include "tracks/simd/loop_nest.h"

namespace cake::embedded {
extern const char* const cake_math_h;
extern const char* const cake_gemm_h;
}  // namespace cake::embedded

namespace cake::tracks {

namespace {

bool has_transcendental(const CheckedContract& c) {
  for (const te::Stmt& s : c.contract.compute) {
    if (te::any_of(*s.rhs, simd::transcendental_call)) return true;
  }
  return false;
}

// Whether evaluating e rounds a float where f32 and f64 evaluation can differ (arithmetic, a rounding
// function, a sum or product). to_f32: e's value is cast to f32 next, directly or as a branch of a where;
// a single operation of two f32 values then gives the same bits computed in f32 (simd::single_f32_op:
// quantize_int8's scale and quotient).
bool rounds(const CheckedContract& c, const te::Expr& e, bool to_f32) {
  switch (e.kind) {
    case te::ExprKind::Binary:  // float arithmetic (comparisons are Bool)
      if (e.type == te::Type::Float && !(to_f32 && simd::single_f32_op(c, e))) return true;
      break;
    case te::ExprKind::Call:
      if (e.fn == te::Fn::Where)
        return rounds(c, *e.args[0], false) || rounds(c, *e.args[1], to_f32) || rounds(c, *e.args[2], to_f32);
      if (e.fn != te::Fn::Min && e.fn != te::Fn::Max && e.fn != te::Fn::Abs && e.fn != te::Fn::Floor &&
          e.fn != te::Fn::Ceil && e.fn != te::Fn::Round)
        return true;
      break;
    case te::ExprKind::Reduce:
      if (e.type == te::Type::Float && (e.reduce == te::ReduceOp::Sum || e.reduce == te::ReduceOp::Prod))
        return true;
      break;
    case te::ExprKind::Cast:
      return rounds(c, *e.args[0], e.cast_to == DType::f32);
    default:
      break;
  }
  return std::any_of(e.args.begin(), e.args.end(),
                     [&](const te::ExprPtr& a) { return rounds(c, *a, false); });
}

// Whether any statement rounds a float as above, or adds with `+=` (in the compute type): without, f32
// evaluation is exact (reads, selections, max / min / arg reductions of inputs, single operations cast to
// f32) and f64 would only convert every element twice.
bool rounds_floats(const CheckedContract& c) {
  return std::any_of(c.contract.compute.begin(), c.contract.compute.end(),
                     [&](const te::Stmt& s) { return s.accumulate || rounds(c, *s.rhs, false); });
}

// Whether the contract sums or multiplies terms (a sum or product reduction, or a statement that
// accumulates): rounding errors there grow with the terms and cancel into small results.
bool sums(const CheckedContract& c) {
  return std::any_of(c.contract.compute.begin(), c.contract.compute.end(), [](const te::Stmt& s) {
    return s.accumulate || te::any_of(*s.rhs, [](const te::Expr& e) {
             return e.kind == te::ExprKind::Reduce &&
                    (e.reduce == te::ReduceOp::Sum || e.reduce == te::ReduceOp::Prod);
           });
  });
}

// Whether every statement is elementwise: no reduction of any kind, nothing accumulated.
bool elementwise(const CheckedContract& c) {
  return std::none_of(c.contract.compute.begin(), c.contract.compute.end(), [](const te::Stmt& s) {
    return s.accumulate || te::contains(*s.rhs, te::ExprKind::Reduce);
  });
}

class SimdTrack final : public Track {
 public:
  std::string_view name() const override { return "simd"; }

  Feasibility feasible(const CheckedContract& c, const target::MachineInfo& m) const override {
    for (DType d : c.contract.dtypes) {
      if (!is_float(d))
        return Feasibility::no(fmt::format("operator dtype {} is not a float dtype", dtype_name(d)));
    }
    for (const SizeInfo& z : c.sizes) {
      if (z.free) continue;
      try {
        emit_size_expr(*z.expr);
      } catch (const Error& e) {
        return Feasibility::no(fmt::format("size '{}': {}", z.name, e.what()));
      }
    }
    (void)m;
    return Feasibility::yes();
  }

  KnobSpace knobs(const CheckedContract& c, const target::MachineInfo& m) const override {
    KnobSpace k;
    k.add_choice(
        "fusion", {"rows", "none"}, "rows",
        "fuse statements sharing leading axes into one parallel loop (per-row intermediates stay in cache)");
    // The f32 gate (relative 2^-13 mean, 10x that max, on every element above 2^-13) fails f32 sums whose
    // terms cancel (matmul, cumsum) and f32 arithmetic where O(1) terms cancel (layer_norm's + b), so sums
    // accumulate in f64 by default, and so does all arithmetic when no transcendental function needs the
    // vectorized f32 math, or when nothing rounds but single operations cast to f32 (argmax, max pooling,
    // gathers, quantize_int8: f32 gives the same bits there). The evolution search may trade either back
    // where the gate allows it.
    k.add_choice("compute", {"f32", "f64"}, has_transcendental(c) || !rounds_floats(c) ? "f32" : "f64",
                 "type of float expressions");
    k.add_choice("acc", {"f32", "f64"}, "f64", "type of sum / prod accumulators");
    k.add_bool("vectorize", true, "#pragma omp simd on innermost loops and reductions");
    k.add_bool("interchange", true,
               "a reduction reading along the innermost axis (convolution, pooling) runs outside it, as "
               "vectorized updates of a row of accumulators");
    if (simd::has_plane_stencil(c)) {
      k.add_bool("plane", true,
                 "a window reduction over the last two axes (depthwise convolution, pooling) packs each "
                 "plane of its window once and updates blocks of outputs held in registers, tap by tap");
    }
    k.add_bool("scan", true,
               "a sum whose upper bound rises with the innermost axis (cumsum) carries a running accumulator "
               "along it instead of summing each prefix anew");
    if (std::any_of(c.contract.compute.begin(), c.contract.compute.end(),
                    [](const te::Stmt& s) { return s.accumulate; })) {
      k.add_bool("scatter_rows", true,
                 "a scatter into rows chosen by data sorts its source rows by target row and sums each "
                 "target row once, in a per-thread row of accumulators (false: a buffer over the whole "
                 "target, summed in place)");
    }
    k.add_int("unroll", {1, 2, 4, 8}, 1,
              "#pragma GCC unroll on innermost loops that are not `omp simd` (1: the compiler decides)");
    k.add_bool("gemm", true,
               "matmul-like statements use the register-blocked Highway micro-kernel over packed panels");
    const bool has_bf16 = c.contract.has_dtype(DType::bf16);
    // bf16's gate (2^-7) is 2^17 times f32's rounding error: f32 sums of thousands of cancelling terms and
    // f32 arithmetic pass it with room to spare, so the bf16 instantiation runs in f32 (twice the vector
    // lanes of f64, no widening of every operand). f16's gate (2^-10) is not as wide: a sum of a thousand
    // terms in f32 fails it on outputs near 2^-10, so f16 keeps `compute` and `acc`.
    if (has_bf16 && rounds_floats(c)) {
      k.add_bool("bf16_f32", true,
                 "the bf16 instantiation computes and sums in f32, whatever `compute` and `acc` say");
    }
    // Where nothing is summed, f32 serves f16 too: a product of two f16 values is exact in f32, and a
    // chain of a few f32 operations errs by a few 2^-24, far inside f16's gate (2^-10) unless cancellation
    // magnifies it 2^14-fold. rope f16 B=2 E=64 H=1 S=2048: 458 -> 344 µs (compute=f64 -> f32).
    if (c.contract.has_dtype(DType::f16) && rounds_floats(c) && !sums(c)) {
      k.add_bool("f16_f32", true, "the f16 instantiation computes in f32, whatever `compute` says");
    }
    // On where every statement is elementwise: add's f16 cases 0.55-0.71x, cast's 0.41-0.97x, rope's
    // 0.63-0.77x but for two cases of under 6 µs (`cake eval --threads 1`, five alternations). A reduction's
    // loops hold reads under a condition (a lane reduction's last block, argmax's unrolled rows), which a
    // call keeps from vectorizing (cake_math.h): reduce_sum f16 D=1000 N=127 1.39x, quantize_int8 f16
    // D=127 N=4096 1.55x; there the evolution search may still turn it on (class P).
    if (m.isa.avx512f && c.contract.has_dtype(DType::f16)) {
      k.add_bool("f16c", elementwise(c),
                 "the f16 instantiation's loads and stores convert with F16C's instructions (a vector "
                 "call per 16 elements) instead of the branch-free bit forms");
    }
    // Sums in f32 as the bf16 instantiation's are by default (bf16_f32), with twice the multiply-adds per
    // instruction; the validation cases check its rounding.
    if (m.isa.avx512bf16 && has_bf16) {
      k.add_bool("bf16_dot", true,
                 "bf16 contractions multiply pairs of inputs with the CPU's bf16 dot product (VDPBF16PS) and "
                 "sum in f32, twice the f32 FMA rate");
    }
    // Streamed outputs of 16-64 MiB (scripts/ab_eval.py, 5-9 alternations, several runs): f32 rms_norm
    // 0.72-0.89, softmax 0.86-0.93, add 0.62-1.16 of the plain stores' time; bf16 and f16 0.87-1.22, no gain
    // to count on (docs/tracks.md). So 4-byte elements by default; the search may try all (class P).
    if (m.isa.avx512f) {
      k.add_choice("stream", {"off", "wide", "all"}, "wide",
                   "outputs of 16 MiB or more are written row by row through a staged 4 KiB block and "
                   "non-temporal stores, which skip reading the output's lines first: never, for elements of "
                   "4 or more bytes, or for all");
      // Converted rows measured slower on bf16 (softmax 1.20-1.22x on all four cases of 8-32 MiB, rms_norm
      // 1.12-1.32x, add 1.45x) and faster on f16 (add 0.65-0.91x, where the plain stores call F16C per 16
      // elements): off by default, a move for the search (class P).
      k.add_bool(
          "stage_rows", false,
          "rows of 64 or more bf16 / f16 outputs are computed into a staged f32 block and converted by "
          "vector instructions (VCVTNE2PS2BF16, VCVTPS2PH) instead of integer operations per element");
    }
    k.add_int("mr", {1, 2, 4, 6, 8}, 6, "micro-kernel tile: rows of C");
    k.add_int("nv", {1, 2, 3, 4}, 2, "micro-kernel tile: vectors of C per row");
    // 16 rows: 10-45% faster on rows of 33 and 127 elements (softmax, layer_norm, rms_norm), within 3% on
    // rows of 4096, whose block of intermediates then sits in L2 instead of L1.
    k.add_int("row_block", {1, 4, 16, 64}, 16,
              "fused rows run each statement over a block of this many rows before the next (per-row "
              "scalar steps vectorize across the block); 1: row by row");
    std::vector<int64_t> threads{0, 1};
    for (int t = 2; t <= std::max(2, m.logical_cores); t *= 2) threads.push_back(t);
    k.add_int("threads", threads, 0, "OpenMP threads (0: all usable cores)");
    k.add_int("parallel_min_work", {0, 4096, 32768, 262144}, 32768,
              "points below which a loop nest runs serially");
    // 4096 I/O elements: below that no nest reaches the parallel_min_work default anyway, so the serial copy
    // only drops the cost of entering OpenMP regions.
    k.add_int("serial_below", {0, 4096, 65536, 1048576}, 4096,
              "shape-regime dispatch: below this many input and output elements a copy of the kernel with no "
              "OpenMP region runs (0: off)");
    return k;
  }

  Artifact lower(const CheckedContract& c, const target::MachineInfo& m,
                 const Knobs& requested) const override {
    const Knobs kn = knobs(c, m).resolve(requested);
    const std::string header = fmt::format(
        "// CAKE simd track: {} (contract {})\n// knobs: {}\n// target: {} ({}), g++ -O3 -march=native "
        "-fopenmp, Highway (static dispatch)\n//\n"
        "// {}\n\n",
        c.contract.name, c.hash, kn.str(), m.cpu_model, m.isa.level(), [&] {
          std::string p = te::print_program(c.contract.compute);
          std::string q;
          for (char ch : p) q += ch == '\n' ? std::string("\n// ") : std::string(1, ch);
          return q;
        }());
    Artifact a;
    a.track = "simd";
    a.op = c.contract.name;
    a.contract_hash = c.hash;
    a.knobs = kn;
    a.main_file = "kernel.cpp";
    a.files.push_back({"kernel.cpp", simd::lower_loop_nest(c, simd::loop_nest_options(kn), header)});
    for (SourceFile& f : prelude_files()) a.files.push_back(std::move(f));
    a.files.push_back({"cake_math.h", embedded::cake_math_h});
    a.files.push_back({"cake_gemm.h", embedded::cake_gemm_h});
    a.steps.push_back({{"g++", "-std=gnu++20", "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared",
                        "-fno-math-errno", "-fno-trapping-math", "-DHWY_WANT_AVX3_DL", "-Wall",
                        "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unused-parameter",
                        "-Wno-unused-local-typedefs", "kernel.cpp", "-o", "kernel.so", "-lhwy"},
                       "compile"});
    return a;
  }
};

}  // namespace

const Track& simd_track() {
  static const SimdTrack t;
  return t;
}

}  // namespace cake::tracks
