// Tests of the opencl track: kernels lowered with default knobs pass the precision gate against the
// reference interpreter on the standard cases, knobs change the code but not the results, bad indices
// give CAKE_ERR_INDEX, and a broken kernel.cl gives a structured diagnostic at build time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "core/error.h"
#include "eval/precision.h"
#include "reference/reference.h"
#include "target/machine.h"
#include "tracks/opencl/opencl_track.h"

namespace cake {
namespace {

const tracks::Track& track() {
  return tracks::opencl_track();
}

target::MachineInfo machine() {
  target::MachineInfo m;
  m.logical_cores = target::logical_cores();
  m.lanes = target::detect_lanes();
  return m;
}

bool opencl_admitted(const target::MachineInfo& m) {
  for (const auto& l : m.lanes)
    if (l.name == "opencl") return l.admitted;
  return false;
}

CheckedContract load_op(const std::string& name) {
  return load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/" + name + ".yaml");
}

// Lowers with `knobs`, builds, and runs every standard case (at most `max_cases`) through the gate.
void check_op(const std::string& op, const tracks::Knobs& knobs = {}, int max_cases = 20) {
  const target::MachineInfo m = machine();
  if (!opencl_admitted(m)) GTEST_SKIP() << "no OpenCL device";
  const CheckedContract c = load_op(op);
  ASSERT_TRUE(track().feasible(c, m).ok) << track().feasible(c, m).reason;
  const tracks::Artifact a = track().lower(c, m, knobs);
  const build::BuildResult r = build::build(a);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  build::Kernel k(r.library);
  int n = 0;
  for (const cases::Case& kc : cases::make_cases(c, cases::Set::Standard)) {
    if (n++ >= max_cases) break;
    const std::vector<Tensor> got = build::run_case(k, c, kc);
    const std::vector<Tensor> want = reference::cached_outputs(c, kc);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const eval::GateResult g = eval::precision_gate(got[i], want[i]);
      EXPECT_TRUE(g.pass) << op << " " << kc.id() << " (" << kc.describe() << ") output " << i << ": "
                          << g.str();
    }
  }
}

// Default knobs on every contract are covered by tests/tracks/conformance_test.cpp.

// The other knob settings give the same results (tree reduction forced on, items per work-item, f32 acc).
TEST(OpenclTrack, KnobsKeepResults) {
  check_op("softmax", {{"local_reduce", "on"}, {"reduce_wg", "16"}, {"ipw", "4"}, {"wg", "64"}}, 8);
  check_op("argmax", {{"local_reduce", "on"}, {"reduce_wg", "128"}}, 8);
  check_op("rms_norm", {{"local_reduce", "off"}, {"compute", "mixed"}}, 8);
}

TEST(OpenclTrack, DataDependentIndexOutOfRange) {
  const target::MachineInfo m = machine();
  if (!opencl_admitted(m)) GTEST_SKIP() << "no OpenCL device";
  const CheckedContract c = load_op("embedding");
  const build::BuildResult r = build::build(track().lower(c, m, {}));
  ASSERT_TRUE(r.ok()) << r.log;
  build::Kernel k(r.library);
  cases::Case kc = cases::make_cases(c, cases::Set::Standard).front();
  std::vector<Tensor> in = cases::make_inputs(c, kc);
  std::vector<Tensor> out = cases::make_outputs(c, kc);
  static_cast<int64_t*>(in[0].data())[0] = kc.free.at("V");  // one past the table
  EXPECT_EQ(k.run(in, out, cases::kernel_params(c, kc)), CAKE_ERR_INDEX);
}

TEST(OpenclTrack, BrokenKernelGivesStructuredDiagnostic) {
  const target::MachineInfo m = machine();
  if (!opencl_admitted(m)) GTEST_SKIP() << "no OpenCL device";
  tracks::Artifact a = track().lower(load_op("gelu"), m, {});
  int line = 0;
  for (auto& f : a.files) {
    if (f.name != "kernel.cl") continue;
    // Break the first statement inside the first kernel.
    size_t at = f.text.find("__kernel");
    at = f.text.find('\n', at) + 1;
    for (size_t i = 0; i < at; ++i) line += f.text[i] == '\n';
    f.text.insert(at, "  undeclared_name = 1;\n");
    ++line;
  }
  const build::BuildResult r = build::build(a);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status, build::BuildStatus::CompileError);
  bool found = false;
  for (const auto& d : r.diagnostics)
    if (d.severity == "error" && d.file == "kernel.cl" && d.line == line) found = true;
  EXPECT_TRUE(found) << r.log;
}

TEST(OpenclTrack, KnobSpaceAndInfeasible) {
  target::MachineInfo m = machine();
  const CheckedContract c = load_op("softmax");
  const tracks::KnobSpace ks = track().knobs(c, m);
  EXPECT_NE(ks.find("wg"), nullptr);
  EXPECT_NE(ks.find("local_reduce"), nullptr);
  EXPECT_EQ(track().knobs(load_op("gelu"), m).find("local_reduce"), nullptr);
  EXPECT_THROW(track().lower(c, m, {{"wg", "3"}}), Error);
  for (auto& l : m.lanes)
    if (l.name == "opencl") l.admitted = false;
  EXPECT_FALSE(track().feasible(c, m).ok);
}

}  // namespace
}  // namespace cake
