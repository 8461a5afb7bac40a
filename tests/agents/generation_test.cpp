// The generation controller on a contract built to fail in f32 (tests/agents/data/naive_variance.yaml: a
// variance by E[x²] − E[x]², catastrophic cancellation): started on simd with f32 arithmetic it fails the
// gate, debug diagnoses precision and the next attempt, with f64, is correct. Bounded attempts end with a
// report of why; an unknown track is a clear failure. No libtorch baseline is timed.
#include "agents/generation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "target/machine.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace cake;

const std::string kVariance = std::string(CAKE_SOURCE_DIR) + "/tests/agents/data/naive_variance.yaml";

class GenerationTest : public ::testing::Test {
 protected:
  GenerationTest() : db_((fs::remove(path_), path_)), s_(db_, target::describe_machine(), 1) {
    s_.baseline = false;
  }
  ~GenerationTest() override { fs::remove(path_); }
  std::vector<std::string> traced_skills() {
    std::vector<std::string> out;
    auto q = db_.prepare("SELECT skill FROM traces WHERE run_id = ? ORDER BY id");
    q.bind(1, *s_.run);
    while (q.step()) out.push_back(q.column_text(0));
    return out;
  }
  fs::path path_ = fs::temp_directory_path() / ("cake-generation-test-" + std::to_string(::getpid()) + ".db");
  store::Store db_;
  skills::Session s_;
};

TEST_F(GenerationTest, RepairsAPrecisionFailureWithF64) {
  agents::GenerationOptions o;
  o.track = "simd";
  o.start_knobs = {{"compute", "f32"}, {"acc", "f32"}};
  const agents::GenerationResult r = agents::generate(s_, kVariance, o);
  ASSERT_TRUE(r.ok) << r.why_none;
  ASSERT_EQ(r.attempts.size(), 2u);
  EXPECT_NE(r.attempts[0].outcome.find("4 of 4 cases fail"), std::string::npos) << r.attempts[0].outcome;
  EXPECT_EQ(r.attempts[1].outcome, "correct");
  EXPECT_NE(r.attempts[1].why.find("repair of precision"), std::string::npos) << r.attempts[1].why;
  EXPECT_EQ(r.best_knobs["acc"], "f64");
  EXPECT_EQ(r.best_knobs["compute"], "f64");
  EXPECT_EQ(r.best["passed"], 4);
  EXPECT_TRUE(r.best["timed"].get<bool>());
  EXPECT_GT(r.seconds_to_first_correct, 0);
  EXPECT_TRUE(fs::exists(r.library));
  // Acted only through skills, every call traced, in order.
  EXPECT_EQ(traced_skills(), (std::vector<std::string>{"describe", "lower", "evaluate", "debug", "lower",
                                                       "evaluate", "evaluate"}));
  // The repaired candidate records the failed one as its parent.
  auto q = db_.prepare("SELECT COUNT(*) FROM candidates WHERE run_id = ? AND parent_id IS NOT NULL");
  q.bind(1, *s_.run);
  q.step();
  EXPECT_EQ(q.column_int64(0), 1);
}

TEST_F(GenerationTest, BoundedAttemptsEndWithTheReason) {
  agents::GenerationOptions o;
  o.track = "simd";
  o.start_knobs = {{"compute", "f32"}, {"acc", "f32"}};
  o.max_attempts = 1;
  const agents::GenerationResult r = agents::generate(s_, kVariance, o);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.attempts.size(), 1u);
  EXPECT_NE(r.why_none.find("no correct kernel in 1 attempts"), std::string::npos) << r.why_none;
  EXPECT_NE(r.why_none.find("wrong-result"), std::string::npos) << r.why_none;
  const json j = agents::to_json(r);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_FALSE(j.contains("library"));
}

TEST_F(GenerationTest, AnUnknownTrackIsAClearFailure) {
  agents::GenerationOptions o;
  o.track = "fortran";
  const agents::GenerationResult r = agents::generate(s_, kVariance, o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why_none.find("unknown track 'fortran'"), std::string::npos) << r.why_none;
}

TEST_F(GenerationTest, ABrokenContractIsReportedNotThrown) {
  const fs::path bad = fs::temp_directory_path() / ("cake-broken-" + std::to_string(::getpid()) + ".yaml");
  { std::ofstream(bad) << "name: broken\ncompute: |\n  y[n] = x[n] +\n"; }
  const agents::GenerationResult r = agents::generate(s_, bad.string(), {});
  fs::remove(bad);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.why_none.empty());
}

}  // namespace
