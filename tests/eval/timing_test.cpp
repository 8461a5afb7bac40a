// The timing harness's input rotation (eval::input_sets): which cases rotate over how many input sets, and
// that the libtorch baseline rotates as the candidate's runner does, its outputs still checked against the
// case's own inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build/process.h"
#include "eval/timing.h"

namespace cake::eval {
namespace {

namespace fs = std::filesystem;
constexpr double kMiB = 1 << 20;

TEST(InputSets, MemoryBoundCasesOfAMebibyteOrMoreRotate) {
  EXPECT_EQ(input_sets(1e6, 8 * kMiB, 4 * kMiB), 17u);       // ceil(64 / 4) + 1
  EXPECT_EQ(input_sets(1e6, 8 * kMiB, 64 * kMiB), 2u);       // one extra set already exceeds 64 MiB
  EXPECT_EQ(input_sets(1e6, 8 * kMiB, 0.5 * kMiB), 1u);      // fits in cache either way
  EXPECT_EQ(input_sets(64 * kMiB, 8 * kMiB, 4 * kMiB), 1u);  // 8 flops per byte: compute-bound
  EXPECT_EQ(input_sets(0, 0, 4 * kMiB), 1u);                 // no traffic counted
}

TEST(InputSets, SetsAndSeeds) {
  EXPECT_EQ(input_set_of(0, 3), 0u);
  EXPECT_EQ(input_set_of(5, 3), 2u);
  EXPECT_EQ(input_set_of(-1, 3), 0u);  // warm-up calls
  EXPECT_EQ(input_set_of(-2, 3), 1u);
  EXPECT_EQ(input_set_seed(7, 1), input_set_seed(7, 1));
  EXPECT_NE(input_set_seed(7, 1), input_set_seed(7, 2));
  EXPECT_NE(input_set_seed(7, 1), input_set_seed(8, 1));
}

#ifdef CAKE_TORCH_BASELINE_PATH
// One JSON line of cake-torch-baseline on index_select with the given sizes and dtype.
nlohmann::json baseline(const std::string& sizes, const std::string& dtype) {
  const fs::path dir = fs::temp_directory_path() / ("cake_timing_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path log = dir / "out.log";
  fs::remove(log);
  const build::ProcessResult r = build::run_process(
      {CAKE_TORCH_BASELINE_PATH, "--contract", std::string(CAKE_SOURCE_DIR) + "/bench/ops/index_select.yaml",
       "--sizes", sizes, "--dtype", dtype, "--threads", "1", "--min-seconds", "0.02", "--json"},
      dir, log, 120);
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  fs::remove_all(dir);
  EXPECT_TRUE(r.started && r.exit_code == 0) << text.str();
  const std::string s = text.str();
  const size_t at = s.find('{');
  if (at == std::string::npos) return nullptr;
  return nlohmann::json::parse(s.substr(at, s.find('\n', at) - at), nullptr, false);
}

TEST(TorchBaseline, RotatesAsTheCandidateDoes) {
  // f16 table of 8192 x 512 (8 MiB, fits the LLC) gathered into 8192 rows: memory-bound, so its inputs
  // rotate over ceil(64 / 8) + 1 = 9 sets; the gate still checks the case's own outputs.
  const nlohmann::json big = baseline("V=8192,D=512,K=8192", "f16");
  ASSERT_TRUE(big.is_object()) << big.dump();
  EXPECT_EQ(big.value("timing_input_sets", 0), 9) << big.dump();
  EXPECT_TRUE(big.at("gate").value("pass", false)) << big.dump();
  const nlohmann::json small = baseline("V=13,D=7,K=100", "f32");
  ASSERT_TRUE(small.is_object()) << small.dump();
  EXPECT_EQ(small.value("timing_input_sets", 0), 1) << small.dump();
  EXPECT_TRUE(small.at("gate").value("pass", false)) << small.dump();
}
#endif

}  // namespace
}  // namespace cake::eval
