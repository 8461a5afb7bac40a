// Tests of L3 in the store: outcomes round trip (the latest per operator and track wins), a refit is saved
// and loads back to the same predictions, keys keep targets apart, malformed rows raise cake::Error.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "core/error.h"
#include "router/record.h"
#include "synthetic.h"

namespace cake::router {
namespace {

namespace fs = std::filesystem;
using testing::synthetic_outcomes;

class RecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cake-router-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(RecordTest, OutcomesRoundTripAndTheLatestWins) {
  store::Store db(dir_ / "cake.db");
  const Key k{"cpu-test"};
  auto data = synthetic_outcomes(5, {{"simd", [](const auto& x, double) { return 10 * x[1]; }}});
  for (const Outcome& o : data) record_outcome(db, k, o);
  Outcome again = data[2];
  again.score = 99;
  record_outcome(db, k, again, std::nullopt);
  record_outcome(db, {"cpu-other"}, data[0]);
  const auto back = load_outcomes(db, k);
  ASSERT_EQ(back.size(), 5u);
  EXPECT_EQ(back[2].op, data[2].op);
  EXPECT_DOUBLE_EQ(back[2].score, 99);
  EXPECT_EQ(back[3].x, data[3].x);
  EXPECT_DOUBLE_EQ(back[3].difficulty, data[3].difficulty);
  EXPECT_EQ(load_outcomes(db, {"cpu-other"}).size(), 1u);
  EXPECT_TRUE(load_outcomes(db, {"cpu-test", "llm"}).empty());
}

TEST_F(RecordTest, RefitIsSavedAndLoadsToTheSamePredictions) {
  store::Store db(dir_ / "cake.db");
  const Key k{"cpu-test"};
  for (const Outcome& o :
       synthetic_outcomes(30, {{"a", [](const auto&x, double) { return 20 + 20 * x[0]; }},
                               {"b", [](const auto&x, double) { return 80 - 20 * x[0]; }}}))
    record_outcome(db, k, o);
  const Model fitted = refit(db, k);
  const Model loaded = load_model(db, k);
  ASSERT_EQ(loaded.tracks.size(), 2u);
  EXPECT_EQ(loaded.x_mean, fitted.x_mean);
  EXPECT_DOUBLE_EQ(loaded.d_mean, fitted.d_mean);
  const std::array<double, kNumFeatures> x{3, 1, 0, 2, 0, 1, 1, 0};
  for (const char* t : {"a", "b", "never"}) {
    EXPECT_DOUBLE_EQ(predict(loaded, t, x, 3).score, predict(fitted, t, x, 3).score) << t;
    EXPECT_DOUBLE_EQ(predict(loaded, t, x, 3).upper, predict(fitted, t, x, 3).upper) << t;
  }
  EXPECT_TRUE(load_model(db, {"cpu-none"}).tracks.empty());
}

TEST_F(RecordTest, MalformedRowsRaiseErrors) {
  store::Store db(dir_ / "cake.db");
  db.exec(
      "INSERT INTO router_abilities(target, policy, track, params_json) VALUES ('t', 'builtin', 'simd', "
      "'{\"a\": 1}');"
      "INSERT INTO router_outcomes(target, policy, track, operator, contract_hash, profile_json, score) "
      "VALUES ('t', 'builtin', 'simd', 'add', 'h', '{\"x\": [1, 2]}', 50);");
  EXPECT_THROW(load_model(db, {"t"}), Error);
  EXPECT_THROW(load_outcomes(db, {"t"}), Error);
}

}  // namespace
}  // namespace cake::router
