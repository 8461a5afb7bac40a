// The simd track's lowering of a whole contract to one C++ translation unit: every statement becomes a
// loop nest over its domain (OpenMP-parallel over the outer axes, `omp simd` on the innermost), and
// consecutive statements that share their leading axes are fused into one parallel loop over those
// axes ("rows"), so per-row intermediates (softmax's exp row, rms_norm's sum) live in a small per-thread
// buffer instead of memory. A scatter statement (`+=`) whose target row is chosen by data (index_add:
// out[idx[i], j] += src[i, j]) sorts its source rows by target row and sums each target row once, in a
// per-thread row of accumulators (`scatter_rows`); other scatters run in parallel over an axis that
// indexes the target directly, serially otherwise. A reduction whose body reads along the innermost axis
// contiguously (convolution, pooling: y[.., j] = Σ_k w[k] · x?[.., j·S + k - P]) is interchanged with that
// axis, so the loop over j is the vectorized one instead of a few-tap scalar loop per output. A sum whose
// upper bound rises with the innermost axis (cumsum: y[n, j] = Σ_{k<=j} x[n, k]) carries a running
// accumulator along that axis instead of summing each prefix anew. Fused rows may run in blocks
// (`row_block`): each statement over the block's rows in turn. A sum of products (`gemm`) runs on the
// register-blocked contraction skeleton: matmul's form, and an implicit GEMM whose rows are one domain
// axis, whose columns are the axes after it and whose k is several reduction variables (convolution: O ×
// Ho·Wo × C·KH·KW per image, its padded input window packed by strided copies). An elementwise statement
// at its domain's own offsets with short rows runs as one loop over the flattened domain. A window
// reduction over the last two axes (depthwise convolution, pooling) packs each plane of its window once,
// into phase planes by the strides, and runs each tap as one contiguous update of output blocks held in
// registers. A sum of a vector with rows picked by the innermost axis (attention's scores) runs as dot
// products of several contiguous rows at a time.
#pragma once

#include <string>

#include "contract/contract.h"
#include "tracks/knobs.h"

namespace cake::tracks::simd {

struct LoopNestOptions {
  std::string compute = "f32";  // Float expressions: f32 | f64
  std::string acc = "f32";      // sum / prod accumulators: f32 | f64
  bool fuse_rows = true;
  bool vectorize = true;    // `#pragma omp simd` on innermost loops and reductions
  bool interchange = true;  // stencil-like reductions run outside the innermost axis, vectorized along it
  bool scan = true;         // a prefix sum along the innermost axis carries its accumulator along that axis
  // A scatter into data-chosen target rows sorts its source rows by target row (a counting sort) and sums
  // each target row in a per-thread accumulator row, written once: no buffer over the whole target.
  bool scatter_rows = true;
  int unroll = 1;   // `#pragma GCC unroll` on innermost domain loops (1 = compiler's choice)
  int threads = 0;  // OpenMP threads; 0 = all
  int64_t parallel_min_work = 32768;  // run a nest serially below this many points
  int64_t serial_below = 0;  // below this many I/O elements, a copy of the kernel without OpenMP regions runs
  // Contractions C[.., i, cols..] = Σ_{k..} A·B (+ elementwise epilogue) use the register-blocked skeleton.
  bool gemm = true;
  int mr = 6;  // its tile: rows of C
  int nv = 2;  // its tile: vectors of C per row
  // A fused group over one leading axis runs each statement over a block of this many rows before the
  // next statement (1: row by row). Per-row scalar steps (rms_norm's rsqrt) then vectorize across the
  // block, and rows' dependency chains (a reduction's lane combine, a divide) overlap.
  int row_block = 16;
  // Contractions of two bf16 inputs multiply pairs with the CPU's bf16 dot product (VDPBF16PS, f32 sums)
  // in the bf16 instantiation, where the compiler targets AVX512-BF16.
  bool bf16_dot = false;
  // The bf16 instantiation computes and accumulates in f32 whatever `compute` and `acc` say: a second copy
  // of the kernel body, emitted in f32 (bf16's gate, 2^-7, is 2^17 times f32's rounding error).
  bool bf16_f32 = false;
  // The f16 instantiation the same, where the contract sums nothing (knob f16_f32).
  bool f16_f32 = false;
  // f16 loads and stores convert with F16C's instructions, as OpenMP simd functions (knob f16c).
  bool f16c = false;
  // A window reduction over the last two axes (depthwise convolution, pooling) packs each plane of its
  // window once into phase planes and takes each tap as one contiguous update of a block of outputs held
  // in registers, where enough taps and rows pay for the packing.
  bool plane = false;
  // Outputs of at least 16 MiB whose elements have at least this many bytes are written row by row through
  // a small staged block and non-temporal stores, which do not read the output's lines first (0: never).
  int stream_elem_bytes = 0;
  // Rows of 16-bit float outputs are computed into a staged f32 block and converted by vector instructions
  // (VCVTNE2PS2BF16, VCVTPS2PH) instead of the prelude's integer forms, per element.
  bool stage_rows = false;
};

LoopNestOptions loop_nest_options(const Knobs& k);

// Whether some statement of c is a window reduction over its last two axes that the `plane` option runs.
bool has_plane_stencil(const CheckedContract& c);

// The kernel source (kernel.cpp): includes cake_prelude.h and cake_math.h, defines cake_run.
std::string lower_loop_nest(const CheckedContract& c, const LoopNestOptions& o,
                            const std::string& header_comment);

}  // namespace cake::tracks::simd
