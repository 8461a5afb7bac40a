// TE -> Halide 14 lowering for the halide track: writes the generator program (pipeline.cpp: Funcs, RDoms,
// the schedule, AOT compilation of one pipeline per I/O dtype) and the C ABI wrapper (wrapper.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "contract/contract.h"

namespace cake::tracks::halide {

// The resolved knobs the lowering needs (halide_track.cpp maps Knobs onto this).
struct Options {
  std::string schedule = "manual";  // manual | adams2019 | li2018 | mullapudi2016
  int vector_width = 16;            // f32 lanes
  bool parallel = true;
  int task_rows = 0;                 // rows per parallel task; 0 = about 32K elements of work per task
  int tile_m = 6;                    // register tile of contractions: rows
  int tile_n = 2;                    // ... and vectors per row
  int unroll_k = 1;                  // unroll of the innermost reduction loop of register-tiled contractions
  std::string stages = "auto";       // auto | inline | at_row | root: where intermediate stages are computed
  bool vectorize_reductions = true;  // split reductions along a contiguous axis into vector lanes
  bool transpose_inputs = true;      // store inputs transposed when a contraction vectorizes a non-last axis
  bool accum_f64_f32io = true;       // sums accumulate in f64 when the I/O dtype is f32
  bool accum_f64_lowp = false;       // ... and when it is bf16 / f16
  std::string machine;               // CPU model and ISA level: the generator targets this host
  bool cpu_has_avx512fp16 = false;   // from the machine: else the host target drops sapphirerapids
  bool f64_elementwise = true;       // f32 I/O: statement arithmetic in f64 (exp / erf / tanh stay f32)
  bool strict_float = false;         // Target::StrictFloat: IEEE semantics for every float operation
};

// Why the contract cannot be lowered by this track, or nullopt.
std::optional<std::string> unsupported(const CheckedContract& c);

// Generator program. `estimate_sizes`: every size symbol by slot for the autoschedulers' estimates.
std::string pipeline_source(const CheckedContract& c, const Options& o,
                            const std::vector<int64_t>& estimate_sizes);

// Plain C++ wrapper exporting cake_run: checks (tracks::emit_abi_prologue), index ranges, halide_buffer_t
// set-up and the dispatch on the operator dtype.
std::string wrapper_source(const CheckedContract& c);

// The AOT function name of the pipeline for one operator dtype ("cake_halide_f32").
std::string pipeline_function(DType op_dtype);

}  // namespace cake::tracks::halide
