// The simd track's contractions that read their operands in place instead of packing B: matrix times
// vector (one column of C: dot products of A's rows with B's column, `cake_gemm::dot_rows`), its transpose
// (one row of C against a B stored as rows along k, a linear layer's weight) and an A of at most 4·MR rows
// (full panels of B read straight from memory, `cake_gemm::tile_in_place`). On small-integer inputs every
// product and partial sum is exact, so whatever the order of the sums, these kernels must give the bits of
// the plain loop nest (gemm=false), for every source dtype (f32, bf16, f16 inputs; an f64 or f32
// intermediate), across tails of k, rows and panels, under each accumulation knob and the bf16 dot
// product; and pass the gate on the standard cases.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"
#include "target/machine.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::Edits;
using testing_simd::lower_and_build;

const fs::path kMatmul = fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "matmul.yaml";

// bench/ops/matmul.yaml with f16 among its dtypes and the edits.
CheckedContract matmul_with(const Edits& edits) {
  Edits all = {{"[f32, bf16]", "[f32, bf16, f16]"}};
  all.insert(all.end(), edits.begin(), edits.end());
  return testing_simd::contract_with(kMatmul.string(), all);
}

struct Variant {
  std::string name;
  Edits edits;
  nlohmann::json knobs;
  std::string expect;  // a call the generated source must contain
  bool panels = true;  // whether B's layout (contiguous along n) allows in-place panels
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

class InPlace : public ::testing::TestWithParam<Variant> {};

TEST_P(InPlace, BitIdenticalToTheLoopNestOnExactSums) {
  const Variant& v = GetParam();
  if (v.knobs.contains("bf16_dot") && !target::describe_machine().isa.avx512bf16)
    GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const CheckedContract c = matmul_with(v.edits);
  nlohmann::json plain_knobs = v.knobs;
  plain_knobs["gemm"] = "false";
  std::string src, plain_src;
  const build::BuildResult gemm = lower_and_build(c, v.knobs, &src),
                           plain = lower_and_build(c, plain_knobs, &plain_src);
  ASSERT_TRUE(gemm.ok()) << gemm.failure << "\n" << gemm.log;
  ASSERT_TRUE(plain.ok()) << plain.failure << "\n" << plain.log;
  EXPECT_NE(src.find(v.expect), std::string::npos) << "the generated source calls " << v.expect;
  EXPECT_EQ(src.find("cake_gemm::tile_in_place<") != std::string::npos, v.panels);
  const build::Kernel k_gemm(gemm.library), k_plain(plain.library);

  // K around the vector widths (8 f64 lanes, 16 f32, 32 bf16 of a dot product) leaves every kind of tail;
  // M runs last row tiles of every size the kernels have (1, 2, 3 and MR = 6 rows: 1, 2, 3, 5, 7, 13),
  // in-place panels up to their limit of 4·MR rows (24) and packed panels past it (25, 27, 29); N = 1 is
  // the matrix-times-vector path, N = 15..70 full and partial panels of 16 (f64) or 32 (f32) columns, at
  // offsets past the first.
  int checked = 0;
  for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (const int64_t kk : {1, 7, 8, 9, 33, 100}) {
      for (const int64_t mm : {1, 2, 3, 5, 6, 7, 13, 24, 25, 27, 29}) {
        for (const int64_t nn : {1, 15, 16, 33, 70}) {
          const cases::Case k = cases::make_case(c, {{"M", mm}, {"N", nn}, {"K", kk}}, dt);
          ASSERT_EQ(testing_simd::first_exact_difference(k_gemm, k_plain, c, k), "");
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 6 * 11 * 5);

  // Sums in f32 fail the gate at large K whatever the path (docs/tracks.md), so only f64 sums are held to it.
  if (v.knobs.contains("acc")) return;
  for (const eval::CaseOutcome& o : eval::check_kernel(k_gemm, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
}

// a2 is an intermediate the contraction reads from a buffer of the compute type (f64, or f32), unfused.
const Edits kScaledA = {{"  c[m, n] = sum(k: a[m, k] * b[k, n])\n",
                         "  a2[m, k] = a[m, k] * 2\n  c[m, n] = sum(k: a2[m, k] * b[k, n])\n"}};
// B stored as rows along k (a linear layer's weight): one row of C is the dot products of A's row with
// B's rows (gemv_t).
const Edits kRowsOfB = {{"b: [K, N]", "b: [N, K]"}, {"b[k, n]", "b[n, k]"}};

INSTANTIATE_TEST_SUITE_P(
    Operands, InPlace,
    ::testing::Values(
        Variant{"inputs", {}, nlohmann::json::object(), "cake_gemm::dot_rows<R, double, typename IO::Src"},
        Variant{"f32_sums", {}, {{"acc", "f32"}, {"compute", "f32"}}, "cake_gemm::dot_rows<R, float"},
        Variant{"f64_buffer", kScaledA, {{"fusion", "none"}}, "cake_gemm::src_f64"},
        Variant{"f32_buffer",
                kScaledA,
                {{"fusion", "none"}, {"acc", "f32"}, {"compute", "f32"}},
                "cake_gemm::src_f32"},
        Variant{"rows_of_b", kRowsOfB, nlohmann::json::object(), "gemv_t = !gemv && cI == 1", false},
        Variant{
            "rows_of_b_bf16_dot", kRowsOfB, {{"bf16_dot", "true"}}, "cake_gemm::dot_rows_bf16<MR>", false}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace cake
