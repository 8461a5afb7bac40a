// One libtorch implementation per CAKE-Bench-CPU operator, as a PyTorch user would write it (the PyTorch
// call named in each contract's summary), with an out form for the timed baseline: out= variants where
// libtorch has them, else the result copied into the preallocated output. See torch_ops.h.
#include "eval/baselines/torch_ops.h"

#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"

namespace cake::torch_ops {

namespace {

using TT = torch::Tensor;
using In = std::vector<TT>;
using Out = std::vector<TT>;

// An out= target: the preallocated output, or (undefined: the functional call) an empty tensor of `opt`
// that the out= variant resizes to its result.
TT& slot(TT& o, const torch::TensorOptions& opt) {
  if (!o.defined()) o = torch::empty({0}, opt);
  return o;
}

// No out= variant: the result itself, or copied (and cast) into the preallocated output.
void put(TT& o, const TT& r) {
  if (o.defined())
    o.copy_(r);
  else
    o = r;
}

TT rms(const TT& x, double eps) {
  return x * torch::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + eps);
}

struct Op {
  int n_out;
  const char* alloc;  // see allocation()
  std::function<void(const In&, const TorchCtx&, Out&)> run;
};

const int64_t kLast[] = {-1};

const std::map<std::string, Op>& ops() {
  static const std::map<std::string, Op> m = {
      // L1
      {"add",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::add_out(slot(o[0], in[0].options()), in[0], in[1]);
        }}},
      {"gelu",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::gelu_out(slot(o[0], in[0].options()), in[0], "none");
        }}},
      {"silu",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) { torch::silu_out(slot(o[0], in[0].options()), in[0]); }}},
      // x.to(dtype): copy_ into the output is the operator (the oracle rounds its clone to the output dtype).
      {"cast",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          if (o[0].defined())
            o[0].copy_(in[0]);
          else
            o[0] = in[0].clone();
        }}},
      // L2
      {"reduce_sum",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::sum_out(slot(o[0], in[0].options()), in[0], at::IntArrayRef(kLast));
        }}},
      {"argmax",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::argmax_out(slot(o[0], in[0].options().dtype(torch::kLong)), in[0], -1);
        }}},
      {"softmax",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::softmax_out(slot(o[0], in[0].options()), in[0], -1);
        }}},
      {"log_softmax",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::log_softmax_out(slot(o[0], in[0].options()), in[0], -1);
        }}},
      {"rms_norm",
       {1, "temporaries",
        [](const In& in, const TorchCtx& k, Out& o) {
          torch::mul_out(slot(o[0], in[0].options()), rms(in[0], k.param("eps")), in[1]);
        }}},
      {"layer_norm",
       {1, "copy",
        [](const In& in, const TorchCtx& k, Out& o) {
          put(o[0], torch::layer_norm(in[0], {k.size("D")}, in[1], in[2], k.param("eps")));
        }}},
      // x.permute(0, 2, 1, 3) is a view; materialising it (copy_ into the output) is the operator.
      {"permute",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          put(o[0], in[0].permute({0, 2, 1, 3}));
        }}},
      {"index_select",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::index_select_out(slot(o[0], in[0].options()), in[0], 0, in[1]);
        }}},
      // inputs { ids, w }: F.embedding(ids, w) is at::embedding(weight, indices). libtorch 1.13's
      // embedding_out
      // is generated (autogen: the functional result copied into out).
      {"embedding",
       {1, "copy",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::embedding_out(slot(o[0], in[1].options()), in[1], in[0]);
        }}},
      {"cumsum",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::cumsum_out(slot(o[0], in[0].options()), in[0], -1);
        }}},
      // L3
      {"matmul",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::matmul_out(slot(o[0], in[0].options()), in[0], in[1]);
        }}},
      {"batched_matmul",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          torch::bmm_out(slot(o[0], in[0].options()), in[0], in[1]);
        }}},
      // F.gelu(F.linear(x, w, b)), the linear written into the output and gelu applied in place.
      {"linear_bias_gelu",
       {1, "none",
        [](const In& in, const TorchCtx&, Out& o) {
          TT& y = slot(o[0], in[0].options());
          torch::linear_out(y, in[0], in[1], in[2]);
          torch::gelu_(y, "none");
        }}},
      {"conv2d",
       {1, "copy",
        [](const In& in, const TorchCtx& k, Out& o) {
          int64_t s = k.size("S"), p = k.size("P");
          put(o[0], torch::conv2d(in[0], in[1], in[2], {s, s}, {p, p}));
        }}},
      {"depthwise_conv2d",
       {1, "copy",
        [](const In& in, const TorchCtx& k, Out& o) {
          int64_t s = k.size("S"), p = k.size("P");
          put(o[0], torch::conv2d(in[0], in[1], in[2], {s, s}, {p, p}, {1, 1}, k.size("C")));
        }}},
      {"maxpool2d",
       {1, "copy",
        [](const In& in, const TorchCtx& k, Out& o) {
          int64_t s = k.size("S"), p = k.size("P");
          put(o[0], torch::max_pool2d(in[0], {k.size("KH"), k.size("KW")}, {s, s}, {p, p}));
        }}},
      {"add_rms_norm",
       {2, "temporaries",
        [](const In& in, const TorchCtx& k, Out& o) {
          TT& h = slot(o[0], in[0].options());
          torch::add_out(h, in[0], in[1]);
          torch::mul_out(slot(o[1], in[0].options()), rms(h, k.param("eps")), in[2]);
        }}},
      // HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)
      {"rope",
       {1, "temporaries",
        [](const In& in, const TorchCtx& k, Out& o) {
          int64_t e = k.size("E");
          const TT& x = in[0];
          TT rot = torch::cat({-x.slice(-1, e, 2 * e), x.slice(-1, 0, e)}, -1);
          torch::add_out(slot(o[0], x.options()), x * in[1], rot * in[2]);
        }}},
      {"scatter_add",
       {1, "none",
        [](const In& in, const TorchCtx& k, Out& o) {
          if (o[0].defined())
            o[0].zero_();
          else
            o[0] = torch::zeros({k.size("V"), k.size("D")}, in[0].options());
          o[0].index_add_(0, in[1], in[0]);
        }}},
      // As torch computes it: the scale is f32 (amax is a value of x, exact in f32, so amax / 127 in f32 is
      // the
      // correctly rounded quotient) and x / scale is an f32 quotient (bf16 / f16 x promote against the f32
      // scale;
      // a float64 x is rounded to f32 explicitly); round() is half to even. q is computed as integral floats
      // and cast to int8 by the copy into the output.
      {"quantize_int8",
       {2, "copy",
        [](const In& in, const TorchCtx&, Out& o) {
          const TT& x = in[0];
          TT amax = x.abs().amax({-1}, /*keepdim=*/true).to(torch::kFloat);
          TT scale = torch::where(amax > 0, amax / 127.0, torch::ones_like(amax));
          TT quot = (x / scale).to(torch::kFloat);
          put(o[0], torch::clamp(torch::round(quot), -127, 127));
          put(o[1], scale.squeeze(-1));
        }}},
      // L4
      {"attention",
       {1, "temporaries",
        [](const In& in, const TorchCtx& k, Out& o) {
          double scale = 1.0 / std::sqrt(static_cast<double>(k.size("D")));
          TT p = torch::softmax(torch::matmul(in[0], in[1].transpose(-2, -1)) * scale, -1);
          torch::matmul_out(slot(o[0], in[0].options()), p, in[2]);
        }}},
      // F.cross_entropy(x, target): mean reduction, no weights, no label smoothing.
      {"cross_entropy",
       {1, "copy",
        [](const In& in, const TorchCtx&, Out& o) { put(o[0], torch::cross_entropy_loss(in[0], in[1])); }}},
  };
  return m;
}

const Op& find_op(const std::string& op) {
  auto it = ops().find(op);
  if (it == ops().end()) throw Error("torch_ops: no libtorch implementation of '" + op + "'");
  return it->second;
}

}  // namespace

int64_t TorchCtx::size(const std::string& name) const {
  auto it = sizes.find(name);
  if (it == sizes.end()) throw Error("torch_ops: no size symbol '" + name + "'");
  return it->second;
}

double TorchCtx::param(const std::string& name) const {
  auto it = params.find(name);
  if (it == params.end()) throw Error("torch_ops: no param '" + name + "' (or the case has no value for it)");
  return it->second;
}

TorchCtx make_ctx(const CheckedContract& c, const cases::Case& k) {
  TorchCtx x;
  for (size_t s = 0; s < c.sizes.size() && s < k.sizes.size(); ++s) x.sizes[c.sizes[s].name] = k.sizes[s];
  const auto& ps = c.contract.params;
  for (size_t i = 0; i < ps.size() && i < k.params.size(); ++i) x.params[ps[i].name] = k.params[i];
  return x;
}

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> v = {"add",
                                             "gelu",
                                             "silu",
                                             "cast",
                                             "reduce_sum",
                                             "argmax",
                                             "softmax",
                                             "log_softmax",
                                             "rms_norm",
                                             "layer_norm",
                                             "permute",
                                             "index_select",
                                             "embedding",
                                             "cumsum",
                                             "matmul",
                                             "batched_matmul",
                                             "linear_bias_gelu",
                                             "conv2d",
                                             "depthwise_conv2d",
                                             "maxpool2d",
                                             "add_rms_norm",
                                             "rope",
                                             "scatter_add",
                                             "quantize_int8",
                                             "attention",
                                             "cross_entropy"};
  return v;
}

bool has_torch_op(const std::string& op) {
  return ops().count(op) > 0;
}

std::vector<torch::Tensor> torch_op(const std::string& op, const std::vector<torch::Tensor>& inputs,
                                    const TorchCtx& ctx) {
  std::vector<torch::Tensor> out(static_cast<size_t>(find_op(op).n_out));
  torch_op_into(op, inputs, ctx, out);
  return out;
}

void torch_op_into(const std::string& op, const std::vector<torch::Tensor>& inputs, const TorchCtx& ctx,
                   std::vector<torch::Tensor>& outputs) {
  const Op& o = find_op(op);
  if (static_cast<int>(outputs.size()) != o.n_out)
    throw Error("torch_ops: " + op + " has " + std::to_string(o.n_out) + " outputs, given " +
                std::to_string(outputs.size()));
  o.run(inputs, ctx, outputs);
}

std::string allocation(const std::string& op) {
  return find_op(op).alloc;
}

torch::ScalarType torch_dtype(DType t) {
  switch (t) {
    case DType::f32:
      return torch::kFloat;
    case DType::f16:
      return torch::kHalf;
    case DType::bf16:
      return torch::kBFloat16;
    case DType::i32:
      return torch::kInt;
    case DType::i64:
      return torch::kLong;
    case DType::i8:
      return torch::kChar;
    case DType::boolean:
      return torch::kBool;
  }
  return torch::kDouble;
}

torch::Tensor to_torch(const Tensor& t, Conv conv) {
  const Shape& shape = t.shape();
  const int64_t n = t.numel();
  if (conv == Conv::native) {
    // cake tensors are dense row-major with torch's element layouts (IEEE f16, bf16, 1-byte bool).
    TT out = torch::empty(shape, torch_dtype(t.dtype()));
    if (static_cast<size_t>(out.nbytes()) != t.nbytes()) throw Error("to_torch: element size mismatch");
    if (t.nbytes() > 0) std::memcpy(out.data_ptr(), t.data(), t.nbytes());
    return out;
  }
  if (is_float(t.dtype())) {
    TT out = torch::empty(shape, torch::kDouble);
    double* p = out.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = t.get(i);
    return out;
  }
  TT out = torch::empty(shape, torch::kLong);
  int64_t* p = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(t.get(i));
  return out;
}

Tensor from_torch(const torch::Tensor& r, DType dt, const Shape& shape, const std::string& what) {
  TT rounded = r.to(torch_dtype(dt)).to(torch::kDouble).contiguous();
  if (rounded.numel() != shape_numel(shape)) {
    std::ostringstream s;
    s << what << ": torch gives " << rounded.sizes() << " (" << rounded.numel() << " elements), the contract "
      << shape_str(shape);
    throw Error(s.str());
  }
  Tensor t(dt, shape);
  const double* p = rounded.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, p[i]);
  return t;
}

}  // namespace cake::torch_ops
