// The `cake` command end to end: `cake check --json` on the suite and on a broken contract, and
// `cake doctor --json`; stdout must be exactly one JSON document.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"

Result run(const std::string& args) {
  std::string cmd = std::string(CAKE_BINARY_DIR) + "/src/cli/cake " + args + " 2>/dev/null";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

namespace {

TEST(Cli, CheckAcceptsTheWholeSuite) {
  Result r = run("check --json " + std::string(CAKE_SOURCE_DIR) + "/bench/ops/*.yaml");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_GE(j.size(), 26u);
  for (const auto& e : j) {
    EXPECT_TRUE(e["ok"].get<bool>()) << e.dump();
    EXPECT_EQ(e["profile"]["features"].size(), 8u);
  }
}

TEST(Cli, CheckReportsTheErrorPosition) {
  auto path = std::filesystem::temp_directory_path() / "cake-cli-bad.yaml";
  std::ofstream(path) << "name: op\nlevel: 1\ndtypes: [f32]\ninputs: { x: [N] }\noutputs: { y: [N] }\n"
                         "compute: |\n  y[i] = x[i] * alpha\ncases:\n  standard: { shapes: { N: [4] } }\n";
  Result r = run("check --json " + path.string());
  EXPECT_EQ(r.code, 1);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_FALSE(j[0]["ok"].get<bool>());
  EXPECT_EQ(j[0]["error"]["line"], 7);
  EXPECT_EQ(j[0]["error"]["col"], 17);
  EXPECT_NE(j[0]["error"]["message"].get<std::string>().find("unknown name 'alpha'"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(Cli, DoctorPrintsMeasuredPeaks) {
  Result r = run("doctor --json");
  ASSERT_EQ(r.code, 0);
  auto j = nlohmann::json::parse(r.out);  // throws if anything but JSON is on stdout
  std::string s = j.dump();
  EXPECT_NE(s.find("bandwidth"), std::string::npos) << s;
  EXPECT_NE(s.find("lanes"), std::string::npos) << s;
}

TEST(Cli, LowerChecksAKernelAgainstTheReference) {
  Result r =
      run("lower --json --check --track simd " + std::string(CAKE_SOURCE_DIR) + "/bench/ops/silu.yaml");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["passed"], 20);
  EXPECT_EQ(j["total"], 20);
  EXPECT_EQ(j["build"]["status"], "ok");
  EXPECT_NE(
      run("lower --track simd -k unroll=3 " + std::string(CAKE_SOURCE_DIR) + "/bench/ops/silu.yaml").code, 0)
      << "a knob value outside the space must fail";
}

// The bench on one operator (without the libtorch baseline, to keep it short): every case sandboxed,
// passing and timed, a score between the 20 % for running and 100, and the level table.
TEST(Cli, BenchScoresAnOperator) {
  Result r = run("bench --json --no-baseline --ops add --store " +
                 (std::filesystem::temp_directory_path() / "cake-cli-bench.db").string() + " --suite " +
                 std::string(CAKE_SOURCE_DIR) + "/bench/ops");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["operators"].size(), 1u);
  const auto& op = j["operators"][0];
  EXPECT_EQ(op["passed"], 20) << op.dump();
  EXPECT_GT(op["score"].get<double>(), 20.0);
  EXPECT_LE(op["score"].get<double>(), 100.0);
  for (const auto& c : op["cases"]) {
    EXPECT_EQ(c["verdict"], "pass") << c.dump();
    EXPECT_GT(c["t_cand_s"].get<double>(), 0.0);
    EXPECT_GT(c["t_floor_s"].get<double>(), 0.0);
  }
  EXPECT_EQ(op["track"], "simd");
  EXPECT_FALSE(j.contains("router")) << "no outcome is recorded without a baseline";
  ASSERT_EQ(j["levels"].size(), 2u);  // level 1, then all
  EXPECT_DOUBLE_EQ(j["levels"][1]["pass_rate"].get<double>(), 1.0);
}

TEST(Cli, BenchRejectsAMissingSuiteAnUnknownOperatorAndAnUnknownSet) {
  const std::string suite = " --suite " + std::string(CAKE_SOURCE_DIR) + "/bench/ops";
  EXPECT_EQ(run("bench --json --no-baseline --suite /nonexistent/ops").code, 2);
  EXPECT_EQ(run("bench --json --no-baseline --ops add,no_such_op" + suite).code, 2);
  EXPECT_NE(run("bench --json --no-baseline --ops add --set hiden" + suite).code, 0);
}

TEST(Cli, UnknownCommandFails) {
  EXPECT_NE(run("frobnicate").code, 0);
}

}  // namespace
