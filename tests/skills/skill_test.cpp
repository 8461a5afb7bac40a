// The skills through call(): schemas enforced on the way in, errors returned (not thrown) for what goes
// wrong inside, every call traced; describe, lower and evaluate on a small contract; debug's diagnosis and
// repairs on hand-written evaluations; optimize's one-move neighbourhood. No libtorch baseline is timed.
#include "skills/skill.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "target/machine.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace cake;

const std::string kVariance = std::string(CAKE_SOURCE_DIR) + "/tests/agents/data/naive_variance.yaml";
const std::string kSoftmax = std::string(CAKE_SOURCE_DIR) + "/bench/ops/softmax.yaml";

class SkillTest : public ::testing::Test {
 protected:
  SkillTest() : db_((fs::remove(path_), path_)), s_(db_, target::describe_machine(), 1) {
    s_.baseline = false;
    s_.begin_run("test", s_.contract(kVariance));
  }
  ~SkillTest() override { fs::remove(path_); }
  int64_t traces(const std::string& skill) {
    auto q = db_.prepare("SELECT COUNT(*) FROM traces WHERE skill = ? AND run_id = ?");
    q.bind(1, skill).bind(2, *s_.run);
    q.step();
    return q.column_int64(0);
  }
  fs::path path_ = fs::temp_directory_path() / ("cake-skill-test-" + std::to_string(::getpid()) + ".db");
  store::Store db_;
  skills::Session s_;
};

TEST_F(SkillTest, CatalogHasTheFiveSkillsWithSchemas) {
  const json c = skills::catalog();
  std::vector<std::string> names;
  for (const json& k : c) {
    names.push_back(k["name"]);
    EXPECT_EQ(k["input"]["type"], "object");
    const json& req = k["output"]["required"];
    EXPECT_NE(std::find(req.begin(), req.end(), "ok"), req.end()) << k["name"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"describe", "lower", "evaluate", "debug", "optimize"}));
}

TEST_F(SkillTest, BadCallsThrowAndAreTraced) {
  EXPECT_THROW(skills::call(s_, "compile", json::object()), skills::SkillError);
  try {
    skills::call(s_, "lower", {{"contract", kVariance}, {"track", 3}, {"colour", "red"}});
    FAIL() << "lower took a malformed input";
  } catch (const skills::SkillError& e) {
    EXPECT_NE(std::string(e.what()).find("/track: expected string, got integer"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown property 'colour'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(traces("compile"), 1);
  EXPECT_EQ(traces("lower"), 1);
}

TEST_F(SkillTest, ErrorsInsideComeBackAsOutputs) {
  const json bad_file = skills::call(s_, "describe", {{"contract", "/no/such/contract.yaml"}});
  EXPECT_FALSE(bad_file["ok"].get<bool>());
  const json bad_knob =
      skills::call(s_, "lower", {{"contract", kVariance}, {"track", "simd"}, {"knobs", {{"acc", "f16"}}}});
  EXPECT_FALSE(bad_knob["ok"].get<bool>());
  EXPECT_NE(bad_knob["error"].get<std::string>().find("acc"), std::string::npos) << bad_knob;
  const json bad_track = skills::call(s_, "lower", {{"contract", kVariance}, {"track", "fortran"}});
  EXPECT_EQ(bad_track["error"], "unknown track 'fortran'");
  const json not_lowered = skills::call(s_, "evaluate", {{"contract", kVariance}, {"candidate", 999999}});
  EXPECT_FALSE(not_lowered["ok"].get<bool>());
  EXPECT_EQ(traces("lower"), 2);
}

TEST_F(SkillTest, DescribeLowerEvaluate) {
  const json d = skills::call(s_, "describe", {{"contract", kVariance}});
  ASSERT_TRUE(d["ok"].get<bool>()) << d;
  EXPECT_EQ(d["operator"], "naive_variance");
  EXPECT_EQ(d["profile"]["features"]["reduction"], 3) << d["profile"];
  EXPECT_FALSE(d["routing"]["chosen"].get<std::string>().empty());

  const json low = skills::call(
      s_, "lower",
      {{"contract", kVariance}, {"track", "simd"}, {"knobs", {{"acc", "f32"}, {"compute", "f32"}}}});
  ASSERT_TRUE(low["ok"].get<bool>()) << low;
  EXPECT_EQ(low["build"]["status"], "ok");
  EXPECT_EQ(low["knobs"]["acc"], "f32");
  EXPECT_TRUE(low["knobs"].contains("unroll")) << "the knobs come back resolved";
  const json ev = skills::call(s_, "evaluate",
                               {{"contract", kVariance}, {"candidate", low["candidate"]}, {"timing", false}});
  ASSERT_TRUE(ev["ok"].get<bool>()) << ev;
  EXPECT_EQ(ev["total"], 4);
  EXPECT_LT(ev["passed"].get<int>(), 4) << "f32 cancellation must fail the gate";
  for (const json& k : ev["cases"]) {
    if (k["verdict"] != "pass") {
      EXPECT_TRUE(k["gate"] == "mere" || k["gate"] == "mare") << k;
    }
  }

  // The same kernel judged as a library built elsewhere gets the same verdicts.
  const json same =
      skills::call(s_, "evaluate", {{"contract", kVariance}, {"library", low["library"]}, {"timing", false}});
  ASSERT_TRUE(same["ok"].get<bool>()) << same;
  EXPECT_EQ(same["track"], "external");
  EXPECT_EQ(same["passed"], ev["passed"]);
  const json ext = skills::call(s_, "evaluate", {{"contract", kVariance}, {"library", "/no/such/kernel.so"}});
  EXPECT_FALSE(ext["ok"].get<bool>());
  EXPECT_EQ(ext["error"], "no such kernel library: /no/such/kernel.so");
}

json failed_case(const std::string& verdict, const std::string& gate = "") {
  return {{"id", "standard/3"}, {"dtype", "bf16"}, {"verdict", verdict}, {"detail", "x"},
          {"mere", 0.02},       {"mare", 0.5},     {"gate", gate}};
}

json evaluation(const json& failed) {
  return {{"cases", {{{"id", "standard/0"}, {"dtype", "f32"}, {"verdict", "pass"}, {"detail", ""}}, failed}}};
}

TEST_F(SkillTest, DebugNamesTheClassAndProposesUntriedRepairs) {
  // Precision on simd: f64 compute and accumulators first.
  json d = skills::call(s_, "debug",
                        {{"contract", kVariance},
                         {"track", "simd"},
                         {"knobs", {{"acc", "f32"}, {"compute", "f32"}}},
                         {"evaluation", evaluation(failed_case("wrong-result", "mare"))}});
  ASSERT_TRUE(d["ok"].get<bool>()) << d;
  EXPECT_EQ(d["diagnosis"]["class"], "precision");
  EXPECT_EQ(d["diagnosis"]["case"], "standard/3");
  ASSERT_FALSE(d["repairs"].empty());
  EXPECT_EQ(d["repairs"][0]["knobs"]["acc"], "f64");
  EXPECT_EQ(d["repairs"][0]["knobs"]["compute"], "f64");
  // The same on halide speaks halide's knobs.
  d = skills::call(s_, "debug",
                   {{"contract", kSoftmax},
                    {"track", "halide"},
                    {"knobs", {{"accum_lowp", "f32"}}},
                    {"evaluation", evaluation(failed_case("wrong-result", "mere"))}});
  EXPECT_EQ(d["repairs"][0]["knobs"]["accum_lowp"], "f64") << d;
  // A tried repair is not proposed again.
  const json first = d["repairs"][0]["knobs"];
  json again = skills::call(s_, "debug",
                            {{"contract", kSoftmax},
                             {"track", "halide"},
                             {"knobs", {{"accum_lowp", "f32"}}},
                             {"evaluation", evaluation(failed_case("wrong-result", "mere"))},
                             {"tried", {first}}});
  for (const json& r : again["repairs"]) EXPECT_NE(r["knobs"], first);
  EXPECT_EQ(again["repairs"].size() + 1, d["repairs"].size());
  // A NaN where the reference has none, or none where it has one: on halide, IEEE float semantics first;
  // on simd (no such knob), conservative code generation.
  d = skills::call(s_, "debug",
                   {{"contract", kSoftmax},
                    {"track", "halide"},
                    {"knobs", json::object()},
                    {"evaluation", evaluation(failed_case("wrong-result", "nan-position"))}});
  EXPECT_EQ(d["diagnosis"]["class"], "wrong-result");
  EXPECT_EQ(d["repairs"][0]["knobs"]["strict_float"], "true") << d;
  d = skills::call(s_, "debug",
                   {{"contract", kVariance},
                    {"track", "simd"},
                    {"knobs", json::object()},
                    {"evaluation", evaluation(failed_case("wrong-result", "nan-position"))}});
  EXPECT_EQ(d["repairs"][0]["knobs"]["vectorize"], "false") << d;
  // A crash: one thread first.
  d = skills::call(s_, "debug",
                   {{"contract", kSoftmax},
                    {"track", "halide"},
                    {"knobs", json::object()},
                    {"evaluation", evaluation(failed_case("crash"))}});
  EXPECT_EQ(d["diagnosis"]["class"], "fault");
  EXPECT_EQ(d["repairs"][0]["knobs"]["parallel"], "false");
  // A failed build: conservative code generation.
  d = skills::call(s_, "debug",
                   {{"contract", kVariance},
                    {"track", "simd"},
                    {"knobs", json::object()},
                    {"build", {{"status", "compile-error"}, {"failure", "step 'compile' exited with 1"}}}});
  EXPECT_EQ(d["diagnosis"]["class"], "build-failed");
  EXPECT_EQ(d["repairs"][0]["knobs"]["vectorize"], "false");
  // The harness failing is not the kernel's fault: nothing to repair.
  d = skills::call(s_, "debug",
                   {{"contract", kVariance},
                    {"track", "simd"},
                    {"knobs", json::object()},
                    {"evaluation", evaluation(failed_case("harness-error"))}});
  EXPECT_EQ(d["diagnosis"]["class"], "harness");
  EXPECT_TRUE(d["exhausted"].get<bool>());
  EXPECT_EQ(traces("debug"), 8);
}

TEST_F(SkillTest, OptimizeProposesOneMoveNeighbours) {
  const json o = skills::call(s_, "optimize",
                              {{"contract", kVariance},
                               {"track", "simd"},
                               {"knobs", {{"unroll", "2"}}},
                               {"knobs_only", {"unroll", "vectorize"}}});
  ASSERT_TRUE(o["ok"].get<bool>()) << o;
  std::vector<std::string> moves;
  for (const json& v : o["variants"]) moves.push_back(v["move"]);
  EXPECT_EQ(moves, (std::vector<std::string>{"vectorize=false", "unroll=1", "unroll=4"}));
  const json capped = skills::call(
      s_, "optimize", {{"contract", kVariance}, {"track", "simd"}, {"knobs", json::object()}, {"max", 2}});
  EXPECT_EQ(capped["variants"].size(), 2u);
}

}  // namespace
