// libtorch implementations of the CAKE-Bench-CPU operators (bench/ops), written as a PyTorch user would call
// them. The same functions serve two callers: the float64 oracle of the reference interpreter
// (tests/reference/torch_oracle_test.cpp: inputs converted to float64 / int64) and the libtorch baseline
// T_base of the score (cake-torch-baseline: inputs in the case's own dtype, outputs preallocated).
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/tensor.h"

namespace cake::torch_ops {

// What an operator may ask of a case: its size symbols and its params by name (throws cake::Error on a
// name the contract lacks).
struct TorchCtx {
  std::map<std::string, int64_t> sizes;
  std::map<std::string, double> params;
  int64_t size(const std::string& name) const;
  double param(const std::string& name) const;
};
TorchCtx make_ctx(const CheckedContract& c, const cases::Case& k);

// The v0 operators, in suite order.
const std::vector<std::string>& op_names();
bool has_torch_op(const std::string& op);

// Outputs in the contract's outputs order, allocated by torch, in the dtype torch computes them in (the
// inputs' float dtype; argmax int64; quantize_int8's q as integral floats and scale f32), not yet rounded to
// the contract's output dtypes. Throws cake::Error on an unknown op; c10::Error from torch as is.
std::vector<torch::Tensor> torch_op(const std::string& op, const std::vector<torch::Tensor>& inputs,
                                    const TorchCtx& ctx);

// As torch_op, writing into `outputs`: each defined (of the shape torch_op gives and the contract's dtype) is
// written in place, with the op's out= variant where libtorch has one (else computed and copy_'d in);
// an undefined one is allocated by torch, as in torch_op.
void torch_op_into(const std::string& op, const std::vector<torch::Tensor>& inputs, const TorchCtx& ctx,
                   std::vector<torch::Tensor>& outputs);

// How the out form of `op` allocates: "none" (out= variants only), "temporaries" (intermediates allocated,
// the last step written with out=), "copy" (no out= variant: torch allocates the result and it is copied).
std::string allocation(const std::string& op);

// libtorch's dtype of a cake dtype (f32 kFloat, f16 kHalf, bf16 kBFloat16, i32 kInt, i64 kLong, i8 kChar,
// bool kBool).
torch::ScalarType torch_dtype(DType t);

// A case tensor as a torch tensor. float64: floats as kDouble, integers and bools as kLong (the oracle);
// native: in its own dtype, bit for bit (the baseline). Read through cake::Tensor's row-major layout.
enum class Conv { float64, native };
torch::Tensor to_torch(const Tensor& t, Conv conv = Conv::float64);

// A torch result rounded to `dt` by torch (.to(dtype)), read back into a cake tensor of the contract's output
// shape; throws cake::Error (prefixed by `what`) when the element counts differ. libtorch 1.13 rounds
// double -> bf16 / f16 through float, so a float64 result may land one bf16 / f16 ulp off a direct rounding.
Tensor from_torch(const torch::Tensor& r, DType dt, const Shape& shape, const std::string& what);

}  // namespace cake::torch_ops
