// The simd track's shape-regime dispatch (knob serial_below): below the threshold a copy of the kernel
// without OpenMP regions runs. Both copies must pass the gate: the standard cases span both sides of the
// threshold, on a fused row nest, a contraction, a scatter and a scan. The serial copy also runs when no
// region would use a second thread. The parallel copy's work threshold leaves its loops vectorized.
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

const target::MachineInfo& machine() {
  static const target::MachineInfo m = target::describe_machine();
  return m;
}

// The simd source of bench operator `op` at default knobs.
std::string default_source(const std::string& op) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml")).string());
  return tracks::find_track("simd")->lower(c, machine(), tracks::Knobs{}).files.front().text;
}

class SerialPath : public ::testing::TestWithParam<std::string> {};

TEST_P(SerialPath, BothRegimesPassTheGate) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (GetParam() + ".yaml")).string());
  const tracks::Track* t = tracks::find_track("simd");
  ASSERT_NE(t, nullptr);
  const tracks::Artifact a = t->lower(c, machine(), tracks::Knobs::from_json({{"serial_below", "65536"}}));
  const std::string& src = a.files.front().text;
  // Every compute function has its serial copy (the bf16 instantiation's f32 copy too), with no OpenMP
  // work sharing in it.
  int functions = 0, serial = 0;
  for (size_t at = src.find("\nint compute"); at != std::string::npos;
       at = src.find("\nint compute", at + 1)) {
    const std::string name = src.substr(at + 5, src.find('(', at) - at - 5);
    ++functions;
    if (!name.ends_with("_serial")) continue;
    ++serial;
    const size_t end = std::min(src.find("\ntemplate ", at), src.find("}  // namespace", at));
    const std::string body = src.substr(at, end - at);
    EXPECT_EQ(body.find("omp parallel"), std::string::npos) << name;
    EXPECT_EQ(body.find("omp for"), std::string::npos) << name;
  }
  EXPECT_EQ(functions, 2 * serial);
  EXPECT_GT(serial, 0);
  EXPECT_NE(src.find("io_elements < INT64_C(65536)"), std::string::npos);

  const build::BuildResult r = build::build(a);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  const build::Kernel k(r.library);
  int small = 0, large = 0;
  for (const cases::Case& kc : cases::make_cases(c, cases::Set::Standard)) {
    double elements = 0;
    for (const Tensor& x : cases::make_inputs(c, kc)) elements += double(x.numel());
    for (const Tensor& x : cases::make_outputs(c, kc)) elements += double(x.numel());
    ++(elements < 65536 ? small : large);
  }
  EXPECT_GT(small, 0);
  EXPECT_GT(large, 0);
  for (const eval::CaseOutcome& o : eval::check_kernel(k, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
}

INSTANTIATE_TEST_SUITE_P(Nests, SerialPath, ::testing::Values("softmax", "matmul", "scatter_add", "cumsum"));

// Between serial_below and parallel_min_work the parallel copy runs on one thread. There an unqualified
// `if` on `omp parallel for simd` switches the simd part off too (OpenMP 5.0): GCC ran gelu's rows of one
// element as scalar code, 7x slower (f32 N=2048 D=1: 20 -> 2.9 us). Every threshold names `parallel`.
TEST(ParallelThreshold, AppliesToThreadsOnlyNotToVectors) {
  for (const std::string op : {"gelu", "silu", "softmax", "matmul"}) {
    const std::string src = default_source(op);
    int clauses = 0;
    for (size_t at = src.find("#pragma omp parallel"); at != std::string::npos;
         at = src.find("#pragma omp parallel", at + 1)) {
      const std::string line = src.substr(at, src.find('\n', at) - at);
      if (line.find(" if(") == std::string::npos) continue;
      ++clauses;
      EXPECT_NE(line.find(" if(parallel: "), std::string::npos) << op << ": " << line;
    }
    EXPECT_GT(clauses, 0) << op;
  }
}

// The serial copy also runs when every OpenMP region would stay on one thread (its work below
// parallel_min_work) however many elements the I/O holds: a gather of a few rows from a large table, an
// elementwise case of a few thousand elements. Entering a region, even a one-thread one, cost ~1.3 us
// (index_select f32 D=1 K=1 V=8192: 1.3 -> 0.03 us). The condition names each region's work in size
// symbols, never the nest's locals, and not the table's size.
TEST(SerialPath, RunsWhenEveryRegionIsBelowItsThreshold) {
  for (const std::string op : {"index_select", "softmax", "matmul", "scatter_add"}) {
    const std::string src = default_source(op);
    const size_t at = src.find("const bool serial = ");
    ASSERT_NE(at, std::string::npos) << op;
    const std::string cond = src.substr(at, src.find('\n', at) - at);
    EXPECT_NE(cond.find("io_elements < INT64_C(4096) || (true && "), std::string::npos) << cond;
    for (const char* local : {"cI", "nbatch", "sr_"}) EXPECT_EQ(cond.find(local), std::string::npos) << cond;
    const std::string body = src.substr(src.find("int compute("), src.find("int compute_serial("));
    int regions = 0;
    for (size_t p = body.find(" if(parallel: ("); p != std::string::npos;
         p = body.find(" if(parallel: (", p + 1)) {
      const size_t from = p + 15, to = body.find(") >= INT64_C(32768))", from);
      const std::string work = body.substr(from, to - from);
      ++regions;
      if (work.find("cI") != std::string::npos) continue;  // the contraction's, named by locals
      EXPECT_NE(cond.find("(" + work + ") < INT64_C(32768)"), std::string::npos) << op << ": " << work;
    }
    EXPECT_GT(regions, 0) << op;
    if (op == "index_select") {
      EXPECT_EQ(cond.find("s_V"), std::string::npos) << cond;
    }
  }
}

}  // namespace
}  // namespace cake
