// An independent oracle for the reference interpreter: for every CAKE-Bench-CPU v0 operator and each of its
// standard cases, libtorch computes the operator in float64 from the case's own inputs, the result is rounded
// to each output's dtype by torch, and the reference interpreter's output must pass the precision gate
// against it. libtorch shares no code with the interpreter, so agreement here means the TE program, the
// interpreter and the PyTorch call a user would write all say the same thing.
//
// Every operator of bench/ops has an oracle below; none is skipped (the coverage test fails on a contract
// without one). An operator torch could not express would be listed here with the reason.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "eval/precision.h"
#include "reference/reference.h"

namespace {

namespace fs = std::filesystem;
using TT = torch::Tensor;

std::string ops_dir() { return std::string(CAKE_SOURCE_DIR) + "/bench/ops"; }

// What an oracle may ask of a case: its sizes by name and its params by name.
struct Ctx {
  const cake::CheckedContract& c;
  const cake::cases::Case& k;

  int64_t size(const std::string& name) const {
    int s = c.size_slot(name);
    if (s < 0 || s >= static_cast<int>(k.sizes.size())) throw cake::Error("oracle: no size symbol '" + name + "'");
    return k.sizes[s];
  }
  double param(const std::string& name) const {
    const auto& ps = c.contract.params;
    for (size_t i = 0; i < ps.size(); ++i)
      if (ps[i].name == name) {
        if (i >= k.params.size()) throw cake::Error("oracle: case has no value for param '" + name + "'");
        return k.params[i];
      }
    throw cake::Error("oracle: no param '" + name + "'");
  }
};

// Inputs arrive in the contract's inputs order as float64 (floats) or int64 (integers) tensors; the
// oracle returns the outputs in the contract's outputs order, in float64 (or int64), unrounded.
using Oracle = std::function<std::vector<TT>(const std::vector<TT>&, const Ctx&)>;

TT rms(const TT& x, double eps) { return x * torch::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + eps); }

const std::map<std::string, Oracle>& oracles() {
  static const std::map<std::string, Oracle> m = {
      // L1
      {"add", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::add(in[0], in[1])}; }},
      {"gelu", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::gelu(in[0], "none")}; }},
      {"silu", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::silu(in[0])}; }},
      // x.to(dtype): the rounding to the output dtype below is the whole operator.
      {"cast", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{in[0].clone()}; }},
      // L2
      {"reduce_sum", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{in[0].sum({-1})}; }},
      {"argmax", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{in[0].argmax(-1)}; }},
      {"softmax", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::softmax(in[0], -1)}; }},
      {"log_softmax",
       [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::log_softmax(in[0], -1)}; }},
      {"rms_norm",
       [](const std::vector<TT>& in, const Ctx& k) {
         return std::vector<TT>{rms(in[0], k.param("eps")) * in[1]};
       }},
      {"layer_norm",
       [](const std::vector<TT>& in, const Ctx& k) {
         return std::vector<TT>{torch::layer_norm(in[0], {k.size("D")}, in[1], in[2], k.param("eps"))};
       }},
      {"permute",
       [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{in[0].permute({0, 2, 1, 3})}; }},
      {"index_select",
       [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::index_select(in[0], 0, in[1])}; }},
      // inputs { ids, w }: F.embedding(ids, w) is at::embedding(weight, indices)
      {"embedding",
       [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::embedding(in[1], in[0])}; }},
      {"cumsum", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::cumsum(in[0], -1)}; }},
      // L3
      {"matmul", [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::matmul(in[0], in[1])}; }},
      {"batched_matmul",
       [](const std::vector<TT>& in, const Ctx&) { return std::vector<TT>{torch::bmm(in[0], in[1])}; }},
      {"linear_bias_gelu",
       [](const std::vector<TT>& in, const Ctx&) {
         return std::vector<TT>{torch::gelu(torch::linear(in[0], in[1], in[2]), "none")};
       }},
      {"conv2d",
       [](const std::vector<TT>& in, const Ctx& k) {
         int64_t s = k.size("S"), p = k.size("P");
         return std::vector<TT>{torch::conv2d(in[0], in[1], in[2], {s, s}, {p, p})};
       }},
      {"depthwise_conv2d",
       [](const std::vector<TT>& in, const Ctx& k) {
         int64_t s = k.size("S"), p = k.size("P");
         return std::vector<TT>{torch::conv2d(in[0], in[1], in[2], {s, s}, {p, p}, {1, 1}, k.size("C"))};
       }},
      {"maxpool2d",
       [](const std::vector<TT>& in, const Ctx& k) {
         int64_t s = k.size("S"), p = k.size("P");
         return std::vector<TT>{torch::max_pool2d(in[0], {k.size("KH"), k.size("KW")}, {s, s}, {p, p})};
       }},
      {"add_rms_norm",
       [](const std::vector<TT>& in, const Ctx& k) {
         TT h = in[0] + in[1];
         return std::vector<TT>{h, rms(h, k.param("eps")) * in[2]};
       }},
      // HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)
      {"rope",
       [](const std::vector<TT>& in, const Ctx& k) {
         int64_t e = k.size("E");
         const TT& x = in[0];
         TT rot = torch::cat({-x.slice(-1, e, 2 * e), x.slice(-1, 0, e)}, -1);
         return std::vector<TT>{x * in[1] + rot * in[2]};
       }},
      {"scatter_add",
       [](const std::vector<TT>& in, const Ctx& k) {
         TT out = torch::zeros({k.size("V"), k.size("D")}, torch::kDouble);
         out.index_add_(0, in[1], in[0]);
         return std::vector<TT>{out};
       }},
      // As torch in f32: the stored scale is f32 and x / scale is an f32 quotient (a single division, so the
      // f64 quotient rounded to f32 is the correctly rounded f32 one); round() is half to even in both.
      {"quantize_int8",
       [](const std::vector<TT>& in, const Ctx&) {
         const TT& x = in[0];
         TT amax = x.abs().amax({-1}, /*keepdim=*/true);
         TT scale = torch::where(amax > 0, amax / 127.0, torch::ones_like(amax)).to(torch::kFloat).to(torch::kDouble);
         TT quot = (x / scale).to(torch::kFloat).to(torch::kDouble);
         TT q = torch::clamp(torch::round(quot), -127, 127);
         return std::vector<TT>{q, scale.squeeze(-1)};
       }},
      // L4
      {"attention",
       [](const std::vector<TT>& in, const Ctx& k) {
         double scale = 1.0 / std::sqrt(static_cast<double>(k.size("D")));
         TT p = torch::softmax(torch::matmul(in[0], in[1].transpose(-2, -1)) * scale, -1);
         return std::vector<TT>{torch::matmul(p, in[2])};
       }},
      {"cross_entropy",
       [](const std::vector<TT>& in, const Ctx&) {
         return std::vector<TT>{torch::nn::functional::cross_entropy(in[0], in[1])};
       }},
  };
  return m;
}

// The v0 operators; each must have a contract in bench/ops and an oracle above.
const std::vector<std::string> kOps = {
    "add",        "gelu",           "silu",          "cast",          "reduce_sum",       "argmax",
    "softmax",    "log_softmax",    "rms_norm",      "layer_norm",    "permute",          "index_select",
    "embedding",  "cumsum",         "matmul",        "batched_matmul", "linear_bias_gelu", "conv2d",
    "depthwise_conv2d", "maxpool2d", "add_rms_norm", "rope",          "scatter_add",      "quantize_int8",
    "attention",  "cross_entropy"};

torch::ScalarType torch_dtype(cake::DType t) {
  switch (t) {
    case cake::DType::f32: return torch::kFloat;
    case cake::DType::f16: return torch::kHalf;
    case cake::DType::bf16: return torch::kBFloat16;
    case cake::DType::i32: return torch::kInt;
    case cake::DType::i64: return torch::kLong;
    case cake::DType::i8: return torch::kChar;
    case cake::DType::boolean: return torch::kBool;
  }
  return torch::kDouble;
}

// A case input as a torch tensor: floats as float64, integers (and bools) as int64, read element by element
// through cake::Tensor::get so the conversion does not depend on the storage layout.
TT to_torch(const cake::Tensor& t) {
  const cake::Shape& shape = t.shape();
  const int64_t n = t.numel();
  if (cake::is_float(t.dtype())) {
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

// A torch result rounded to `dt` by torch (to(kFloat / kBFloat16 / kHalf / kInt8 / kLong)), read back
// into a cake tensor of the contract's output shape. libtorch 1.13 rounds double -> bf16 / f16 through
// float (measured: 134 of 2^24 random doubles land one bf16 ulp off a direct round-to-nearest-even, 1006
// for f16), so a bf16 / f16 case may show a MARE of one ulp (2^-8..2^-7 relative) here: far inside 10 T.
cake::Tensor from_torch(const TT& r, cake::DType dt, const cake::Shape& shape, const std::string& what) {
  TT rounded = r.to(torch_dtype(dt)).to(torch::kDouble).contiguous();
  if (rounded.numel() != cake::shape_numel(shape)) {
    std::ostringstream s;
    s << what << ": torch gives " << rounded.sizes() << " (" << rounded.numel() << " elements), the contract "
      << cake::shape_str(shape);
    throw cake::Error(s.str());
  }
  cake::Tensor t(dt, shape);
  const double* p = rounded.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, p[i]);
  return t;
}

std::string fmt_double(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

class TorchOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchOracle, StandardCasesMatchLibtorchInFloat64) {
  const std::string op = GetParam();
  const std::string path = ops_dir() + "/" + op + ".yaml";
  ASSERT_TRUE(fs::exists(path)) << "no contract " << path;
  auto it = oracles().find(op);
  ASSERT_NE(it, oracles().end()) << "no torch oracle for " << op;

  cake::CheckedContract c;
  try {
    c = cake::load_and_check(path);
  } catch (const cake::ContractError& e) {
    FAIL() << "contract rejected: " << e.loc().str() << ": " << e.message() << " (" << e.hint() << ")";
  } catch (const std::exception& e) {
    FAIL() << "contract rejected: " << e.what();
  }
  const std::vector<int> outs = c.output_ids();
  const std::vector<cake::cases::Case> cases = cake::cases::make_cases(c, cake::cases::Set::Standard);
  ASSERT_EQ(cases.size(), 20u) << op << ": the standard set must hold 20 cases";

  torch::NoGradGuard no_grad;
  int passed = 0;
  double worst_mare = -1;
  std::string worst_case;
  for (const auto& k : cases) {
    const std::string where = op + " " + k.id() + " (" + k.describe() + ")";
    try {
      std::vector<cake::Tensor> inputs = cake::cases::make_inputs(c, k);
      std::vector<cake::Tensor> ref = cake::reference::cached_outputs(c, k);
      ASSERT_EQ(ref.size(), outs.size()) << where << ": reference returned " << ref.size() << " outputs";

      std::vector<TT> tin;
      tin.reserve(inputs.size());
      for (const auto& t : inputs) tin.push_back(to_torch(t));
      std::vector<TT> tout = it->second(tin, Ctx{c, k});
      ASSERT_EQ(tout.size(), outs.size()) << where << ": the oracle returned " << tout.size() << " outputs";

      bool case_ok = true;
      for (size_t o = 0; o < outs.size(); ++o) {
        const cake::TensorInfo& info = c.tensors[outs[o]];
        const cake::DType dt = info.dtype_for(k.dtype);
        const cake::Shape shape = cake::tensor_shape(c, outs[o], k.sizes);
        cake::Tensor want = from_torch(tout[o], dt, shape, where + " output " + info.name);
        const cake::Tensor& got = ref[o];
        ASSERT_EQ(got.dtype(), dt) << where << " output " << info.name << ": reference dtype "
                                   << cake::dtype_name(got.dtype()) << ", contract " << cake::dtype_name(dt);
        cake::eval::GateResult g = cake::eval::precision_gate(got, want);
        std::printf("[oracle] %-17s %-12s %-40s out %-6s MERE=%.3g MARE=%.3g %s\n", op.c_str(), k.id().c_str(),
                    k.describe().c_str(), info.name.c_str(), g.mere, g.mare, g.pass ? "pass" : "FAIL");
        if (g.mare > worst_mare) {
          worst_mare = g.mare;
          worst_case = k.id() + " " + info.name;
        }
        if (!g.pass) {
          case_ok = false;
          // Tell a stale on-disk cache (outputs of other inputs, e.g. after the value generator changed
          // without the cache key changing) from a wrong interpreter: run the interpreter afresh.
          std::vector<cake::Tensor> fresh = cake::reference::run(c, k, inputs);
          cake::eval::GateResult gf = cake::eval::precision_gate(fresh.at(o), want);
          if (gf.pass) {
            ADD_FAILURE() << where << " output " << info.name << ": STALE REFERENCE CACHE: cached_outputs fails "
                          << "the gate (MERE=" << fmt_double(g.mere) << " MARE=" << fmt_double(g.mare)
                          << ") but reference::run on the same inputs passes (MERE=" << fmt_double(gf.mere)
                          << " MARE=" << fmt_double(gf.mare) << "): the cache key misses whatever changed "
                          << "the inputs or the interpreter; clear " << "the reference cache";
            continue;
          }
          ADD_FAILURE() << where << " output " << info.name << " [" << cake::dtype_name(dt) << " "
                        << cake::shape_str(shape) << "]: reference fails the gate against libtorch (f64): "
                        << "MERE=" << fmt_double(g.mere) << " MARE=" << fmt_double(g.mare)
                        << " worst element #" << g.worst << " reference=" << fmt_double(g.worst_got)
                        << " torch=" << fmt_double(g.worst_want) << " mismatches=" << g.mismatches
                        << " reason=" << g.reason << " | " << g.str();
        }
      }
      if (case_ok) ++passed;
    } catch (const std::exception& e) {
      ADD_FAILURE() << where << ": " << e.what();
    }
  }
  std::printf("[oracle] %s: %d/%zu standard cases pass; worst MARE %.3g at %s\n", op.c_str(), passed,
              cases.size(), worst_mare, worst_case.c_str());
  std::fflush(stdout);
}

INSTANTIATE_TEST_SUITE_P(BenchOpsV0, TorchOracle, ::testing::ValuesIn(kOps),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// No operator of the suite goes unchecked: every contract in bench/ops has an oracle and is in kOps.
TEST(TorchOracleCoverage, EveryBenchOpHasAnOracle) {
  ASSERT_TRUE(fs::is_directory(ops_dir())) << ops_dir();
  for (const auto& e : fs::directory_iterator(ops_dir())) {
    if (e.path().extension() != ".yaml") continue;
    const std::string op = e.path().stem().string();
    EXPECT_TRUE(oracles().count(op)) << "bench/ops/" << op << ".yaml has no torch oracle";
    EXPECT_NE(std::find(kOps.begin(), kOps.end(), op), kOps.end()) << op << " is not in kOps";
  }
  for (const auto& op : kOps) EXPECT_TRUE(fs::exists(ops_dir() + "/" + op + ".yaml")) << "missing contract " << op;
}

}  // namespace
