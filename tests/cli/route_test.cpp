// `cake route` and `cake router fit` end to end, on a store filled with synthetic outcomes for the real
// suite's profiles (nothing is timed): "simd" wins where there is no contraction, "halide" where there is.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "contract/contract.h"
#include "profile/profile.h"
#include "router/gate.h"
#include "router/record.h"
#include "target/machine.h"

namespace {

namespace fs = std::filesystem;

const std::string kOps = std::string(CAKE_SOURCE_DIR) + "/bench/ops";

class RouteCli : public ::testing::Test {
 protected:
  void SetUp() override { fs::remove(db_); }
  void TearDown() override { fs::remove(db_); }
  void record_synthetic() {
    cake::store::Store s(db_);
    const cake::router::Key key{cake::router::target_key(cake::target::describe_machine())};
    for (const auto& e : fs::directory_iterator(kOps)) {
      if (e.path().extension() != ".yaml") continue;
      const cake::CheckedContract c = cake::load_and_check(e.path().string());
      const cake::profile::Profile p = cake::profile::profile_of(c);
      const double k = p.x[cake::profile::Contraction];
      cake::router::record_outcome(s, key,
                                   cake::router::outcome_of(p, c.contract.name, c.hash, "simd", 85 - 25 * k));
      cake::router::record_outcome(
          s, key, cake::router::outcome_of(p, c.contract.name, c.hash, "halide", 40 + 15 * k));
    }
  }
  std::string store() const { return " --store " + db_.string(); }
  fs::path db_ = fs::temp_directory_path() / "cake-cli-route.db";
};

TEST_F(RouteCli, WithoutRecordsEveryFeasibleTrackTiesAndIsWorthMeasuring) {
  const Result r = run("route --json " + kOps + "/add.yaml" + store());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out)["operators"][0];
  EXPECT_EQ(j["operator"], "add");
  EXPECT_EQ(j["deciding"], "tie (registry order)");
  EXPECT_GE(j["tracks"].size(), 2u);
  EXPECT_EQ(j["also_measure"].size(), j["tracks"].size() - 1);
  EXPECT_EQ(run("router fit" + store()).code, 1) << "no outcomes: nothing to fit";
}

TEST_F(RouteCli, RoutesByTheRecordedOutcomes) {
  record_synthetic();
  const fs::path svg = fs::temp_directory_path() / "cake-cli-route.svg";
  const Result fit = run("router fit --json --leave-one-out --plot " + svg.string() + store());
  ASSERT_EQ(fit.code, 0) << fit.out;
  const auto f = nlohmann::json::parse(fit.out);
  EXPECT_EQ(f["outcomes"], 2 * f["leave_one_out"]["rows"].size());
  EXPECT_LT(f["leave_one_out"]["mean_regret"].get<double>(),
            f["leave_one_out"]["mean_fixed_regret"].get<double>());
  EXPECT_TRUE(fs::file_size(svg) > 1000);
  fs::remove(svg);

  const Result r = run("route --json " + kOps + "/add.yaml " + kOps + "/matmul.yaml" + store());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto ops = nlohmann::json::parse(r.out)["operators"];
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0]["chosen"], "simd") << ops[0].dump();
  EXPECT_EQ(ops[1]["chosen"], "halide") << ops[1].dump();
  // Few operators have a matmul-like contraction, so simd's bound there is wide: worth measuring, unless
  // exploration is off.
  const Result greedy = run("route --json --explore 0 " + kOps + "/matmul.yaml" + store());
  ASSERT_EQ(greedy.code, 0) << greedy.out;
  EXPECT_TRUE(nlohmann::json::parse(greedy.out)["operators"][0]["also_measure"].empty()) << greedy.out;
}

TEST_F(RouteCli, ABrokenContractIsAnErrorNotACrash) {
  const fs::path bad = fs::temp_directory_path() / "cake-cli-route-bad.yaml";
  std::ofstream(bad) << "name: op\nlevel: 1\n";
  const Result r = run("route --json " + bad.string() + store());
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["operators"][0].contains("error"));
  fs::remove(bad);
}

}  // namespace
