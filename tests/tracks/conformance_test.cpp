// Every track against the reference on the same cases (the ggml way): for each (operator of bench/ops or
// of tests/tracks/edge_ops, registered track) the track either declares the operator infeasible with a
// reason (the test is skipped and says why) or its default-knob kernel passes the precision gate on all
// standard cases, in every I/O dtype of the contract. The edge operators hold what the bench's do not
// (NaNs made inside the kernel, stored in every dtype). Coverage checks the rule on feasibility.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

const fs::path kEdgeOps = fs::path(CAKE_SOURCE_DIR) / "tests" / "tracks" / "edge_ops";

std::vector<std::string> yaml_stems(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") v.push_back(e.path().stem().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> ops() {
  return yaml_stems(fs::path(CAKE_SOURCE_DIR) / "bench" / "ops");
}

const target::MachineInfo& machine() {
  static const target::MachineInfo m = target::describe_machine();
  return m;
}

CheckedContract contract(const std::string& op) {
  const fs::path edge = kEdgeOps / (op + ".yaml");
  if (fs::exists(edge)) return load_and_check(edge.string());
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml")).string());
}

struct Pair {
  std::string op, track;
};

class Conformance : public ::testing::TestWithParam<Pair> {};

TEST_P(Conformance, StandardCasesPassTheGate) {
  const auto& [op, track_name] = GetParam();
  const CheckedContract c = contract(op);
  const tracks::Track* t = tracks::find_track(track_name);
  ASSERT_NE(t, nullptr);
  const tracks::Feasibility f = t->feasible(c, machine());
  if (!f.ok) GTEST_SKIP() << track_name << " declares " << op << " infeasible: " << f.reason;
  const tracks::Artifact a = t->lower(c, machine(), {});
  const build::BuildResult r = build::build(a);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  const build::Kernel k(r.library);
  int passed = 0, total = 0;
  std::string failures;
  for (const eval::CaseOutcome& o : eval::check_kernel(k, c, cases::Set::Standard)) {
    ++total;
    if (o.pass)
      ++passed;
    else
      failures += o.str() + "\n";
  }
  EXPECT_EQ(passed, total) << op << "/" << track_name << " (" << a.knobs.str() << ")\n" << failures;
  EXPECT_EQ(total, c.contract.standard.count);
}

std::vector<Pair> pairs() {
  std::vector<Pair> v;
  std::vector<std::string> all = ops();
  for (const std::string& op : yaml_stems(kEdgeOps)) all.push_back(op);
  for (const std::string& op : all)
    for (const tracks::Track* t : tracks::all_tracks()) v.push_back({op, std::string(t->name())});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllOps, Conformance, ::testing::ValuesIn(pairs()),
                         [](const ::testing::TestParamInfo<Pair>& p) {
                           return p.param.op + "_" + p.param.track;
                         });

// Every operator has a feasible track; level 1 and 2 operators two; the five named in the issue all of them.
TEST(Coverage, EveryOperatorHasEnoughFeasibleTracks) {
  const std::vector<std::string> all_three{"gelu", "silu", "softmax", "rms_norm", "layer_norm"};
  const size_t n_tracks = tracks::all_tracks().size();
  for (const std::string& op : ops()) {
    const CheckedContract c = contract(op);
    size_t feasible = 0;
    std::string why;
    for (const tracks::Track* t : tracks::all_tracks()) {
      const tracks::Feasibility f = t->feasible(c, machine());
      if (f.ok)
        ++feasible;
      else
        why += std::string(t->name()) + ": " + f.reason + "; ";
    }
    EXPECT_GE(feasible, 1u) << op << ": " << why;
    if (c.contract.level <= 2) {
      EXPECT_GE(feasible, std::min<size_t>(2, n_tracks)) << op << ": " << why;
    }
    if (std::find(all_three.begin(), all_three.end(), op) != all_three.end()) {
      EXPECT_EQ(feasible, n_tracks) << op << ": " << why;
    }
  }
}

}  // namespace
}  // namespace cake
