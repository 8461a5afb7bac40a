// The simd track's shape-regime dispatch (knob serial_below): below the threshold a copy of the kernel
// without OpenMP regions runs. Both copies must pass the gate: the standard cases span both sides of the
// threshold, on a fused row nest, a contraction, a scatter and a scan.
#include <gtest/gtest.h>

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

class SerialPath : public ::testing::TestWithParam<std::string> {};

TEST_P(SerialPath, BothRegimesPassTheGate) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (GetParam() + ".yaml")).string());
  const tracks::Track* t = tracks::find_track("simd");
  ASSERT_NE(t, nullptr);
  const tracks::Artifact a = t->lower(c, machine(), tracks::Knobs::from_json({{"serial_below", "65536"}}));
  const std::string& src = a.files.front().text;
  const size_t serial = src.find("int compute_serial(");
  ASSERT_NE(serial, std::string::npos);
  const std::string serial_body = src.substr(serial, src.find("}  // namespace", serial) - serial);
  EXPECT_EQ(serial_body.find("omp parallel"), std::string::npos);
  EXPECT_EQ(serial_body.find("omp for"), std::string::npos);
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

}  // namespace
}  // namespace cake
