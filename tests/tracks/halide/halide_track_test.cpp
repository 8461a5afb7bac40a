// Tests of the halide track: its f32 math against libm, the knob space, feasibility over the suite, and
// built kernels against the reference interpreter through the precision gate.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "eval/conformance.h"
#include "reference/reference.h"
#include "target/machine.h"
#include "tracks/halide/halide_math.h"
#include "tracks/halide/halide_track.h"

#include "../f16_checks.h"

namespace cake {
namespace {

using tracks::halide_track;

target::MachineInfo machine() {
  target::MachineInfo m;
  m.isa = target::detect_isa();
  m.logical_cores = target::logical_cores();
  return m;
}

CheckedContract op(const std::string& name) {
  return load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/" + name + ".yaml");
}

double rel(double got, double want) {
  return std::fabs(got - want) / std::max(std::fabs(want), 1e-300);
}

TEST(HalideMath, ErfMatchesLibm) {
  double worst = 0;
  for (int i = -60000; i <= 60000; ++i) {
    float x = static_cast<float>(i) * 1e-4f;
    double want = std::erf(static_cast<double>(x));
    if (want == 0) continue;
    worst = std::max(worst, rel(tracks::halide::erf_f32(x), want));
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_EQ(tracks::halide::erf_f32(0.0f), 0.0f);
  EXPECT_EQ(tracks::halide::erf_f32(12.0f), 1.0f);
  EXPECT_EQ(tracks::halide::erf_f32(-12.0f), -1.0f);
}

TEST(HalideMath, ErfcIsAccurateInTheTails) {
  double worst = 0;
  for (int i = -60000; i <= 90000; ++i) {
    float x = static_cast<float>(i) * 1e-4f;
    double want = std::erfc(static_cast<double>(x));
    if (want < 1e-36) continue;  // below f32's normal range
    worst = std::max(worst, rel(tracks::halide::erfc_f32(x), want));
  }
  EXPECT_LT(worst, 1e-6);
}

TEST(HalideMath, ExpAndTanh) {
  double we = 0, wt = 0;
  for (int i = -87000; i <= 88000; ++i) {
    float x = static_cast<float>(i) * 1e-3f;
    we = std::max(we, rel(tracks::halide::exp_f32(x), std::exp(static_cast<double>(x))));
  }
  for (int i = -20000; i <= 20000; ++i) {
    float x = static_cast<float>(i) * 5e-4f;
    if (x == 0) continue;
    wt = std::max(wt, rel(tracks::halide::tanh_f32(x), std::tanh(static_cast<double>(x))));
  }
  EXPECT_LT(we, 3e-7);
  EXPECT_LT(wt, 3e-7);
  EXPECT_EQ(tracks::halide::exp_f32(-100.0f), 0.0f);
  EXPECT_TRUE(std::isinf(tracks::halide::exp_f32(100.0f)));
  EXPECT_TRUE(std::isnan(tracks::halide::exp_f32(NAN)));
}

TEST(HalideTrack, KnobsAreTypedAndBounded) {
  const CheckedContract c = op("gelu");
  const auto m = machine();
  const tracks::KnobSpace s = halide_track().knobs(c, m);
  ASSERT_NE(s.find("schedule"), nullptr);
  EXPECT_EQ(s.defaults().choice("schedule"), "manual");
  EXPECT_THROW(halide_track().lower(c, m, tracks::Knobs{{"vector_width", "7"}}), Error);
  EXPECT_THROW(halide_track().lower(c, m, tracks::Knobs{{"no_such_knob", "1"}}), Error);
  EXPECT_THROW(halide_track().lower(c, m, tracks::Knobs{{"schedule", "magic"}}), Error);
  const tracks::Artifact a = halide_track().lower(c, m, {});
  EXPECT_EQ(a.main_file, "pipeline.cpp");
  EXPECT_EQ(a.knobs.choice("stages"), "auto");
  EXPECT_EQ(a.steps.size(), 4u);
}

TEST(HalideTrack, FeasibilityOverTheSuite) {
  const auto m = machine();
  int ok = 0;
  for (const char* name :
       {"add",           "gelu",        "silu",          "cast",           "softmax",      "rms_norm",
        "layer_norm",    "log_softmax", "argmax",        "reduce_sum",     "cumsum",       "embedding",
        "index_select",  "permute",     "matmul",        "batched_matmul", "conv2d",       "depthwise_conv2d",
        "maxpool2d",     "scatter_add", "quantize_int8", "rope",           "add_rms_norm", "linear_bias_gelu",
        "cross_entropy", "attention"}) {
    const CheckedContract c = op(name);
    const tracks::Feasibility f = halide_track().feasible(c, m);
    if (f.ok)
      ++ok;
    else
      std::printf("  %s: infeasible: %s\n", name, f.reason.c_str());
  }
  EXPECT_GE(ok, 20);
}

// Lowers with default knobs (plus `extra`), builds, and gates every standard case (or the first `limit`).
void check_op(const std::string& name, const tracks::Knobs& extra, size_t limit = 20) {
  const CheckedContract c = op(name);
  const build::BuildResult b = build::build(halide_track().lower(c, machine(), extra));
  ASSERT_TRUE(b.ok()) << name << " " << extra.str() << ": " << b.failure << "\n" << b.log.substr(0, 6000);
  const build::Kernel k(b.library);
  size_t n = 0;
  for (const eval::CaseOutcome& o : eval::check_kernel(k, c, cases::Set::Standard)) {
    if (n++ >= limit) break;
    EXPECT_TRUE(o.pass) << name << " " << extra.str() << ": " << o.str();
  }
}

// The track's f16 stores are its own, bit by bit (Halide's float16 cast turns NaN into infinity), its loads
// Halide's cast: cast's f32 -> f16 stores against core's rounding over f32 bit patterns of every class
// (testing_f16::f32_sweep), and add's f16 loads over every f16 pattern, whose sum with +0 must give the
// pattern back (-0 and NaN payloads aside).
TEST(HalideTrack, F16ConversionsAreExact) {
  {
    const CheckedContract c = op("cast");
    const build::BuildResult b = build::build(halide_track().lower(c, machine(), {}));
    ASSERT_TRUE(b.ok()) << b.failure;
    testing_f16::expect_stores_round_as_core(c, build::Kernel(b.library));
  }
  {
    const CheckedContract c = op("add");
    const build::BuildResult b = build::build(halide_track().lower(c, machine(), {}));
    ASSERT_TRUE(b.ok()) << b.failure;
    const build::Kernel k(b.library);
    const int64_t m = 64, n = 1024;
    std::vector<Tensor> in, out;
    in.emplace_back(DType::f16, Shape{m, n});
    in.emplace_back(DType::f16, Shape{n});
    auto* x = static_cast<uint16_t*>(in[0].data());
    for (int64_t i = 0; i < m * n; ++i) x[i] = static_cast<uint16_t>(i);
    std::memset(in[1].data(), 0, n * sizeof(uint16_t));
    out.emplace_back(DType::f16, Shape{m, n});
    const cases::Case kc = cases::make_case(c, {{"M", m}, {"N", n}}, DType::f16);
    ASSERT_EQ(k.run(in, out, cases::kernel_params(c, kc)), 0);
    const auto* z = static_cast<const uint16_t*>(out[0].data());
    for (int64_t i = 0; i < m * n; ++i) {
      if (x[i] == 0x8000u) continue;  // -0 + 0 = +0
      ASSERT_TRUE(testing_f16::same_half(z[i], x[i])) << "x " << x[i] << ": got " << z[i];
    }
  }
}

// Halide lets LLVM assume no NaN and no infinity unless StrictFloat is on: sqrt(x) * 0 and x / 0 * 0 are
// folded to 0 where the reference has NaN, and the gate says so (nan-position). With `strict_float` the
// kernel keeps the NaNs.
TEST(HalideTrack, StrictFloatKeepsTheNaNsFastMathFolds) {
  const CheckedContract c =
      load_and_check(std::string(CAKE_SOURCE_DIR) + "/tests/tracks/halide/data/fast_math_edges.yaml");
  for (const bool strict : {false, true}) {
    const build::BuildResult b =
        build::build(halide_track().lower(c, machine(), {{"strict_float", strict ? "true" : "false"}}));
    ASSERT_TRUE(b.ok()) << b.failure;
    const build::Kernel k(b.library);
    for (const eval::CaseOutcome& o : eval::check_kernel(k, c, cases::Set::Standard)) {
      if (strict) {
        EXPECT_TRUE(o.pass) << o.str();
      } else {
        ASSERT_FALSE(o.pass) << "fast math kept the NaNs; the test no longer shows the knob's use";
        for (const eval::GateResult& g : o.outputs) EXPECT_EQ(g.reason, "nan-position") << o.str();
      }
    }
  }
}

// Default knobs on every contract are covered by tests/tracks/conformance_test.cpp; other schedules here.
TEST(HalideTrack, OtherManualSchedulesKeepResults) {
  check_op("softmax", {{"stages", "root"}}, 8);
  check_op("layer_norm", {{"stages", "inline"}, {"vector_width", "8"}}, 8);
  check_op("matmul", {{"tile_m", "4"}, {"tile_n", "1"}}, 8);
}

// Halide's own autoschedulers are peers the evolution issue measures against. Their schedules assume
// outputs at least as large as the estimates (the largest standard case): on smaller shapes the pipeline
// may refuse the call, which must come back as a status code (never an abort, never a wrong result),
// and the largest case must pass.
TEST(HalideTrack, AutoschedulersBuildAndPassOnTheLargestCase) {
  for (const char* s : {"adams2019", "li2018", "mullapudi2016"}) {
    for (const char* name : {"gelu", "softmax"}) {
      SCOPED_TRACE(std::string(s) + " " + name);
      const CheckedContract c = op(name);
      const build::BuildResult b = build::build(halide_track().lower(c, machine(), {{"schedule", s}}));
      ASSERT_TRUE(b.ok()) << b.failure << "\n" << b.log.substr(0, 4000);
      const build::Kernel k(b.library);
      const std::vector<cases::Case> cs = cases::make_cases(c, cases::Set::Standard);
      size_t largest = 0;
      for (size_t i = 0; i < cs.size(); ++i)
        if (cases::case_bytes(c, cs[i]) > cases::case_bytes(c, cs[largest])) largest = i;
      const std::vector<eval::CaseOutcome> os = eval::check_kernel(k, c, cases::Set::Standard);
      for (const eval::CaseOutcome& o : os)
        EXPECT_TRUE(o.pass || !o.error.empty()) << "wrong result: " << o.str();
      EXPECT_TRUE(os[largest].pass) << os[largest].str();
    }
  }
}

}  // namespace
}  // namespace cake
