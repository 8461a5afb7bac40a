// C++ source fragments every CPU-hosted track's kernel needs around its computation: the ABI prologue
// (argument counts, size symbols from params, shape / dtype / layout checks), integer size expressions,
// identifier naming, and the text of the support headers a generated artifact ships with. Tracks emit
// their own computation; this keeps the uniform C ABI (core/kernel_abi.h) handled in one place.
#pragma once

#include <string>
#include <vector>

#include "contract/contract.h"
#include "tracks/track.h"

namespace cake::tracks {

// Identifiers for generated code, prefixed so no TE name can clash with C/C++ keywords or each other:
// size symbol N → s_N, tensor x → t_x, index variable n → v_n, param eps → p_eps.
std::string size_id(const std::string& name);
std::string tensor_id(const std::string& name);
std::string var_id(const std::string& name);
std::string param_id(const std::string& name);

// Statements for the body of
//   extern "C" int cake_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out,
//                           const double* params, int n_params)
// that return CAKE_ERR_ARGS / _SHAPE / _LAYOUT / _DTYPE when the call disagrees with the contract, and
// otherwise leave declared:
//   const double p_<param> = params[i];           every param
//   const int64_t s_<size> = ...;                  every size symbol (free from params, derived computed)
//   const int32_t op_dtype = ...;                  the operator dtype code of this call (one of `dtypes`)
// Requires the generated file to include "cake_prelude.h" (prelude_files()).
std::string emit_abi_prologue(const CheckedContract& c);

// The operator dtype of a call, as a C expression over `in` / `out`: the dtype of the first tensor whose
// shape does not fix one (the contract's only dtype when every tensor fixes its own).
std::string op_dtype_expr(const CheckedContract& c);

// An integer size expression in C/C++ over the s_<size> identifiers (division and modulo floor, as the
// TE defines them, via cake_floordiv / cake_floormod from the prelude).
std::string emit_size_expr(const te::Expr& e);

// The same over another language's leaves: `leaf` spells a literal or a size symbol, `min` / `max` name
// the two functions (the Halide track wraps sizes in Expr(...)).
struct SizeSpelling {
  std::string (*number)(int64_t);
  std::string (*size)(const std::string& name);
  const char* min = "cake_min64";
  const char* max = "cake_max64";
};
std::string emit_size_expr(const te::Expr& e, const SizeSpelling& spelling);

// Support headers to add to an artifact's files: "cake_kernel_abi.h" (core/kernel_abi.h) and
// "cake_prelude.h" (floor division, f16 / bf16 conversions with round-to-nearest-even, saturating
// integer casts, shape checks). Plain C99-compatible C++.
std::vector<SourceFile> prelude_files();

// "exports.map": the linker version script that leaves cake_run the only exported symbol
// (-Wl,--version-script=exports.map).
SourceFile exports_map();

// The C type name for a dtype's storage: float, uint16_t (f16 and bf16 bits), int32_t, int64_t, int8_t, bool.
std::string storage_type(DType t);

}  // namespace cake::tracks
