// The simd track's elementwise rows split into regions by the range of their padded reads along the row
// (rope's x?[.., j + E] and x?[.., j − E]): in each region every such read is wholly in range (no bounds
// test) or wholly out (its pad value), so 16-bit rows vectorize. On small-integer inputs every product and
// sum is exact, so the kernel must give the bits of the unvectorized kernel (vectorize=false: a bounds
// test per element): on rope, and on a contract with three windows (a negative coefficient, a pad value,
// a window wholly outside short rows, rows on both sides of the 64-element threshold).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::lower_and_build;

const char* kWindows = R"(name: windows
level: 2
dtypes: [f32, bf16, f16]
inputs:  { x: [N, D] }
outputs: { y: [N, D] }
compute: |
  y[n, j] = x?[n, j - 2] + x?(1)[n, 70 - j] * 2 - x?[n, j + 90]
cases:
  standard: { shapes: { N: [3], D: [100] } }
)";

struct Pair {
  build::Kernel regions, plain;
};

std::optional<Pair> kernels(const CheckedContract& c) {
  std::string src, plain_src;
  const build::BuildResult on = lower_and_build(c, nlohmann::json::object(), &src),
                           off = lower_and_build(c, {{"vectorize", "false"}}, &plain_src);
  EXPECT_TRUE(on.ok()) << on.failure << "\n" << on.log;
  EXPECT_TRUE(off.ok()) << off.failure << "\n" << off.log;
  EXPECT_NE(src.find("int64_t cut["), std::string::npos) << "the rows are split into regions";
  EXPECT_EQ(plain_src.find("int64_t cut["), std::string::npos);
  if (!on.ok() || !off.ok()) return std::nullopt;
  return Pair{build::Kernel(on.library), build::Kernel(off.library)};
}

TEST(RangeRegions, RopeBitIdenticalToTheCheckedLoop) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "rope.yaml").string());
  const std::optional<Pair> k = kernels(c);
  ASSERT_TRUE(k);
  // E = 1, 15 (rows under the threshold), 32, 64, 100 (regions of 32.. 100 elements)
  for (const int64_t e : {1, 15, 32, 64, 100}) {
    for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
      const cases::Case kc = cases::make_case(c, {{"B", 2}, {"H", 3}, {"S", 5}, {"E", e}}, dt);
      EXPECT_EQ(testing_simd::first_exact_difference(k->regions, k->plain, c, kc), "");
    }
  }
  for (const eval::CaseOutcome& o : eval::check_kernel(k->regions, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
}

TEST(RangeRegions, ThreeWindowsBitIdenticalToTheCheckedLoop) {
  const CheckedContract c = check_contract(load_contract_text(kWindows, "windows.yaml"));
  const std::optional<Pair> k = kernels(c);
  ASSERT_TRUE(k);
  // D = 1, 63 (under the threshold), 64, 71 (x?(1)[70 − j] in range on [0, 70]), 100, 200 (j + 90 in range
  // on the first 110)
  for (const int64_t d : {1, 63, 64, 71, 100, 200}) {
    for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
      const cases::Case kc = cases::make_case(c, {{"N", 3}, {"D", d}}, dt);
      EXPECT_EQ(testing_simd::first_exact_difference(k->regions, k->plain, c, kc), "");
    }
  }
}

}  // namespace
}  // namespace cake
