// The sandboxed runner (eval/sandbox.h) against one hand-written cheat or fault kernel per verdict
// (tests/eval/error/), on the add contract: each gets its verdict with a useful detail, and a correct
// kernel (the simd track's) run right after it still passes, so no fault leaks into the next case.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "build/build_service.h"
#include "contract/contract.h"
#include "eval/sandbox.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::eval {
namespace {

namespace fs = std::filesystem;

std::string contract_file() {
  return (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "add.yaml").string();
}

fs::path cheat(const std::string& name) {
  return fs::path(CAKE_CHEAT_DIR) / ("libcake_cheat_" + name + ".so");
}

class Sandbox : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    contract_ = new CheckedContract(load_and_check(contract_file()));
    // 7 x 1023 f32: the output's 28644 bytes are not a whole number of pages, so "one past the end" lands
    // in the guard page only because the runner places the output flush against it.
    case_ = new cases::Case(cases::make_case(*contract_, {{"M", 7}, {"N", 1023}}, DType::f32, 1));
    const tracks::Track* simd = tracks::find_track("simd");
    ASSERT_NE(simd, nullptr);
    const build::BuildResult r = build::build(simd->lower(*contract_, target::describe_machine(), {}));
    ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
    good_ = new fs::path(r.library);
  }
  static void TearDownTestSuite() {
    delete contract_;
    delete case_;
    delete good_;
  }

  static CaseRun run(const fs::path& lib, const SandboxOptions& o = {}, const cases::Case* k = nullptr) {
    CaseRun r = run_sandboxed(lib, contract_file(), k != nullptr ? *k : *case_, o);
    std::printf("  %-28s %-20s %.3f s  %s\n", lib.filename().c_str(),
                std::string(verdict_name(r.verdict)).c_str(), r.wall_seconds, r.detail.c_str());
    return r;
  }

  // The correct kernel still passes after whatever ran before it.
  static void expect_good_passes() {
    const CaseRun r = run(*good_);
    EXPECT_EQ(r.verdict, Verdict::Pass) << verdict_name(r.verdict) << ": " << r.detail;
    ASSERT_EQ(r.gates.size(), 1U);
    EXPECT_TRUE(r.gates[0].pass);
  }

  static void expect_verdict(const std::string& name, Verdict want, const std::string& detail_has,
                             SandboxOptions o = {}) {
    const CaseRun r = run(cheat(name), o);
    EXPECT_EQ(r.verdict, want) << "got " << verdict_name(r.verdict) << ": " << r.detail;
    EXPECT_NE(r.detail.find(detail_has), std::string::npos) << r.detail;
    expect_good_passes();
  }

  static CheckedContract* contract_;
  static cases::Case* case_;
  static fs::path* good_;
};
CheckedContract* Sandbox::contract_ = nullptr;
cases::Case* Sandbox::case_ = nullptr;
fs::path* Sandbox::good_ = nullptr;

TEST_F(Sandbox, VerdictNamesAreTheDocumentedOnes) {
  EXPECT_EQ(verdict_name(Verdict::Pass), "pass");
  EXPECT_EQ(verdict_name(Verdict::OutOfBoundsWrite), "out-of-bounds-write");
  EXPECT_EQ(verdict_name(Verdict::HarnessError), "harness-error");
  EXPECT_NE(reverify_seed(*case_), case_->seed);
}

TEST_F(Sandbox, CorrectKernelPasses) {
  expect_good_passes();
}

TEST_F(Sandbox, WritesNothingIsNoOutput) {
  expect_verdict("no_output", Verdict::NoOutput, "'z'");
}

TEST_F(Sandbox, WritesZerosIsWrongResult) {
  expect_verdict("zeros", Verdict::WrongResult, "out z[");
}

TEST_F(Sandbox, FirstAnswerReplayedIsStaleResult) {
  expect_verdict("stale", Verdict::StaleResult, "re-verification");
}

TEST_F(Sandbox, MutatedInputIsNamed) {
  expect_verdict("mutate_input", Verdict::InputMutated, "'x'");
}

TEST_F(Sandbox, NullWriteIsCrashWithSigsegv) {
  expect_verdict("segfault", Verdict::Crash, "SIGSEGV at 0x0");
}

TEST_F(Sandbox, EndlessLoopIsTimeout) {
  SandboxOptions o;
  o.wall_seconds = 2;
  expect_verdict("hang", Verdict::Timeout, "no result after 2 s", o);
}

TEST_F(Sandbox, HugeAllocationIsOutOfMemory) {
  expect_verdict("huge_alloc", Verdict::OutOfMemory, "CAKE_ERR_NOMEM");
}

TEST_F(Sandbox, WriteOnePastTheEndIsOutOfBounds) {
  expect_verdict("oob_write", Verdict::OutOfBoundsWrite, "guard page");
}

TEST_F(Sandbox, ThreadWritingAfterReturnIsLateWrite) {
  expect_verdict("late_write", Verdict::LateWrite, "after the kernel returned");
}

TEST_F(Sandbox, LibraryThatDoesNotLoadIsCompileError) {
  expect_verdict("no_such_kernel", Verdict::CompileError, "does not load");
}

TEST_F(Sandbox, MissingRunnerIsHarnessError) {
  ::setenv("CAKE_RUNNER", "/nonexistent/cake-runner", 1);
  const CaseRun r = run(*good_);
  ::unsetenv("CAKE_RUNNER");
  EXPECT_EQ(r.verdict, Verdict::HarnessError);
  expect_good_passes();
}

TEST_F(Sandbox, ConcurrentCallsDoNotMixUp) {
  CaseRun a, b;
  std::thread ta([&] { a = run(*good_); });
  std::thread tb([&] { b = run(cheat("segfault")); });
  ta.join();
  tb.join();
  EXPECT_EQ(a.verdict, Verdict::Pass) << a.detail;
  EXPECT_EQ(b.verdict, Verdict::Crash) << b.detail;
}

TEST_F(Sandbox, TimingTheCorrectKernel) {
  SandboxOptions o;
  o.time_it = true;
  o.timing.min_seconds = 0.05;
  const CaseRun r = run(*good_, o);
  ASSERT_EQ(r.verdict, Verdict::Pass) << r.detail;
  ASSERT_TRUE(r.timing.has_value());
  EXPECT_GE(r.timing->reps, 5);
  EXPECT_GT(r.timing->median_s, 0);
  EXPECT_LE(r.timing->min_s, r.timing->median_s);
  EXPECT_EQ(r.timing_input_sets, 1) << "a 57 KB case fits in cache: the same inputs every call";
  std::printf("  timing: median %.3g s, min %.3g s, %d reps\n", r.timing->median_s, r.timing->min_s,
              r.timing->reps);
}

// 1024 x 1024 f32: 4 MiB of inputs at 1/12 flop per byte, so the timing rotates over enough input sets
// to exceed 64 MiB (ceil(64 / 4) + 1 = 17) and no call finds its inputs in the last-level cache.
TEST_F(Sandbox, MemoryBoundCaseRotatesInputSets) {
  const cases::Case big = cases::make_case(*contract_, {{"M", 1024}, {"N", 1024}}, DType::f32, 3);
  SandboxOptions o;
  o.time_it = true;
  o.timing.min_seconds = 0.05;
  const CaseRun r = run(*good_, o, &big);
  ASSERT_EQ(r.verdict, Verdict::Pass) << r.detail;
  ASSERT_TRUE(r.timing.has_value());
  EXPECT_GE(r.timing->reps, 5);
  EXPECT_EQ(r.timing_input_sets, 17);
  o.rotate = false;
  const CaseRun same = run(*good_, o, &big);
  ASSERT_EQ(same.verdict, Verdict::Pass) << same.detail;
  EXPECT_EQ(same.timing_input_sets, 1);
  std::printf("  1024x1024 add: median %.3g s rotated over %d sets, %.3g s on the same inputs\n",
              r.timing->median_s, r.timing_input_sets, same.timing->median_s);
}

}  // namespace
}  // namespace cake::eval
