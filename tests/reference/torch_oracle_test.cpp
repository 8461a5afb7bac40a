// An independent oracle for the reference interpreter: for every CAKE-Bench-CPU v0 operator and each of its
// standard cases, libtorch computes the operator in float64 from the case's own inputs, the result is rounded
// to each output's dtype by torch, and the reference interpreter's output must pass the precision gate
// against it. libtorch shares no code with the interpreter, so agreement here means the TE program, the
// interpreter and the PyTorch call a user would write all say the same thing.
//
// Every operator of bench/ops has an oracle below; none is skipped (the coverage test fails on a contract
// without one). An operator torch could not express would be listed here with the reason. The libtorch
// implementations live in cake_torch_ops (src/eval/baselines/torch_ops.h), shared with the libtorch baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "eval/baselines/torch_ops.h"
#include "eval/precision.h"
#include "reference/reference.h"

namespace {

namespace fs = std::filesystem;
using TT = torch::Tensor;

std::string ops_dir() {
  return std::string(CAKE_SOURCE_DIR) + "/bench/ops";
}

// Inputs arrive in the contract's inputs order as float64 (floats) or int64 (integers) tensors
// (torch_ops::to_torch); torch_ops::torch_op returns the outputs in the contract's outputs order, computed in
// float64 (or int64), unrounded; torch_ops::from_torch rounds them to each output's dtype.
namespace to = cake::torch_ops;

// The v0 operators; each must have a contract in bench/ops and an oracle in cake_torch_ops.
const std::vector<std::string>& kOps = to::op_names();

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
  ASSERT_TRUE(to::has_torch_op(op)) << "no torch oracle for " << op;

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
      for (const auto& t : inputs) tin.push_back(to::to_torch(t, to::Conv::float64));
      std::vector<TT> tout = to::torch_op(op, tin, to::make_ctx(c, k));
      ASSERT_EQ(tout.size(), outs.size()) << where << ": the oracle returned " << tout.size() << " outputs";

      bool case_ok = true;
      for (size_t o = 0; o < outs.size(); ++o) {
        const cake::TensorInfo& info = c.tensors[outs[o]];
        const cake::DType dt = info.dtype_for(k.dtype);
        const cake::Shape shape = cake::tensor_shape(c, outs[o], k.sizes);
        cake::Tensor want = to::from_torch(tout[o], dt, shape, where + " output " + info.name);
        const cake::Tensor& got = ref[o];
        ASSERT_EQ(got.dtype(), dt) << where << " output " << info.name << ": reference dtype "
                                   << cake::dtype_name(got.dtype()) << ", contract " << cake::dtype_name(dt);
        cake::eval::GateResult g = cake::eval::precision_gate(got, want);
        std::printf("[oracle] %-17s %-12s %-40s out %-6s MERE=%.3g MARE=%.3g %s\n", op.c_str(),
                    k.id().c_str(), k.describe().c_str(), info.name.c_str(), g.mere, g.mare,
                    g.pass ? "pass" : "FAIL");
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
            ADD_FAILURE() << where << " output " << info.name
                          << ": STALE REFERENCE CACHE: cached_outputs fails "
                          << "the gate (MERE=" << fmt_double(g.mere) << " MARE=" << fmt_double(g.mare)
                          << ") but reference::run on the same inputs passes (MERE=" << fmt_double(gf.mere)
                          << " MARE=" << fmt_double(gf.mare) << "): the cache key misses whatever changed "
                          << "the inputs or the interpreter; clear "
                          << "the reference cache";
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
    EXPECT_TRUE(to::has_torch_op(op)) << "bench/ops/" << op << ".yaml has no torch oracle";
    EXPECT_NE(std::find(kOps.begin(), kOps.end(), op), kOps.end()) << op << " is not in kOps";
  }
  for (const auto& op : kOps)
    EXPECT_TRUE(fs::exists(ops_dir() + "/" + op + ".yaml")) << "missing contract " << op;
}

}  // namespace
