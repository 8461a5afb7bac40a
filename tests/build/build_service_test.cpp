// The build service: a second build of the same artifact is a cache hit that runs no tool (in this
// process and in another one), a broken source gives structured diagnostics, a hung step times out, a
// missing compiler is named, and parallel builds keep their order.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"

namespace cake::build {
namespace {

namespace fs = std::filesystem;

// A fresh cache directory per test binary run, so "first build" really is the first.
class BuildService : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("cake-build-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::setenv("CAKE_CACHE_DIR", dir_.c_str(), 1);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path BuildService::dir_;

tracks::Artifact tiny(const std::string& body, const std::string& op = "tiny") {
  tracks::Artifact a;
  a.track = "test";
  a.op = op;
  a.main_file = "kernel.c";
  a.files.push_back({"kernel.c", "#include <stdint.h>\n" + body});
  a.steps.push_back({{"gcc", "-O1", "-fPIC", "-shared", "kernel.c", "-o", "kernel.so"}, "compile"});
  return a;
}

const char* kGood =
    "typedef struct { void* data; int32_t dtype, rank; int64_t shape[8], stride[8]; } cake_tensor;\n"
    "int cake_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out, const double* p, int np) {\n"
    "  return n_in == 0 && n_out == 0 && np == 1 && p[0] == 42.0 ? 0 : 9;\n}\n";

TEST_F(BuildService, SecondBuildIsACacheHitAndRunsNoTool) {
  const tracks::Artifact a = tiny(kGood);
  const int before = tool_runs();
  const BuildResult first = build(a);
  ASSERT_TRUE(first.ok()) << first.failure << "\n" << first.log;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(tool_runs(), before + 1);
  const BuildResult second = build(a);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(tool_runs(), before + 1) << "a cache hit must not start a compiler";
  EXPECT_EQ(second.library, first.library);
  const Kernel k(second.library);
  std::vector<Tensor> in, out;
  EXPECT_EQ(k.run(in, out, {42.0}), 0);
  EXPECT_EQ(k.run(in, out, {1.0}), 9);
}

TEST_F(BuildService, AnotherProcessFindsTheBuildInTheCache) {
  const tracks::Artifact a = tiny(std::string(kGood) + "/* cross-process */\n");
  ASSERT_TRUE(build(a).ok());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int before = tool_runs();
    const BuildResult r = build(a);
    _exit(r.ok() && r.cache_hit && tool_runs() == before ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child process rebuilt the artifact";
}

TEST_F(BuildService, BrokenSourceGivesStructuredDiagnostics) {
  // line 2 of kernel.c (after the #include line): an undeclared identifier at column 29
  const tracks::Artifact a = tiny("int cake_run(void) { return undeclared_thing; }\n", "broken");
  const BuildResult r = build(a);
  EXPECT_EQ(r.status, BuildStatus::CompileError);
  ASSERT_FALSE(r.diagnostics.empty()) << r.log;
  const Diagnostic& d = r.diagnostics.front();
  EXPECT_EQ(d.file, "kernel.c");
  EXPECT_EQ(d.line, 2);
  EXPECT_EQ(d.col, 29);
  EXPECT_EQ(d.severity, "error");
  EXPECT_NE(d.message.find("undeclared_thing"), std::string::npos) << d.message;
  EXPECT_EQ(d.step, "compile");
  EXPECT_NE(r.failure.find("kernel.c:2:29"), std::string::npos) << r.failure;
  // A compile error is cached too: the same broken source is not compiled again.
  const int before = tool_runs();
  const BuildResult again = build(a);
  EXPECT_TRUE(again.cache_hit);
  EXPECT_EQ(tool_runs(), before);
  ASSERT_FALSE(again.diagnostics.empty());
  EXPECT_EQ(again.diagnostics.front().line, 2);
}

TEST_F(BuildService, HungStepTimesOut) {
  tracks::Artifact a = tiny(kGood, "hang");
  a.steps.insert(a.steps.begin(), {{"sleep", "30"}, "wait"});
  BuildOptions o;
  o.step_timeout_s = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  const BuildResult r = build(a, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.status, BuildStatus::Timeout);
  EXPECT_LT(s, 10.0);
  EXPECT_NE(r.failure.find("wait"), std::string::npos);
  EXPECT_FALSE(build(a, o).cache_hit) << "a timeout is not cached";
}

TEST_F(BuildService, MissingToolIsNamed) {
  tracks::Artifact a = tiny(kGood, "missing");
  a.steps[0].argv[0] = "cake-no-such-compiler";
  const BuildResult r = build(a);
  EXPECT_EQ(r.status, BuildStatus::ToolMissing);
  EXPECT_NE(r.failure.find("cake-no-such-compiler"), std::string::npos);
}

TEST_F(BuildService, ParallelBuildsKeepTheirOrder) {
  std::vector<tracks::Artifact> as;
  for (int i = 0; i < 3; ++i)
    as.push_back(tiny(std::string(kGood) + "int v" + std::to_string(i) + ";\n", "par" + std::to_string(i)));
  as.push_back(tiny("oops\n", "par-broken"));
  BuildOptions o;
  o.jobs = 2;
  int told = 0;
  o.progress = [&](std::string_view) { ++told; };
  const std::vector<BuildResult> rs = build_all(as, o);
  ASSERT_EQ(rs.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(rs[static_cast<size_t>(i)].ok()) << i;
  EXPECT_EQ(rs[3].status, BuildStatus::CompileError);
  EXPECT_EQ(told, 4);
  EXPECT_NE(rs[0].hash, rs[1].hash);
}

TEST(Diagnostics, ParsesGccAndClangLines) {
  const auto ds = parse_diagnostics(
      "In file included from kernel.cpp:3:\n"
      "cake_prelude.h:10:5: error: expected ';' before 'return'\n"
      "kernel.cpp:7:12: warning: unused variable 'x' [-Wunused-variable]\n"
      "kernel.cl:4:1: note: declared here\n"
      "ld: something without a position\n",
      "compile");
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0].file, "cake_prelude.h");
  EXPECT_EQ(ds[0].line, 10);
  EXPECT_EQ(ds[0].col, 5);
  EXPECT_EQ(ds[0].message, "expected ';' before 'return'");
  EXPECT_EQ(ds[1].severity, "warning");
  EXPECT_EQ(ds[2].severity, "note");
}

}  // namespace
}  // namespace cake::build
