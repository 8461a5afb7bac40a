// The simd track's contraction skeleton beyond matmul's form: several reduction variables flattened into
// one k, C's columns several domain axes flattened, and B evaluated while packing: convolution as an
// implicit GEMM (O × Ho·Wo × C·KH·KW per image), its padded window packed by strided copies along the last
// axis (`kwin`), a read along another axis packed by evaluating it per column, and A packed once per batch
// it depends on. On small-integer inputs every product and partial sum is exact, so whatever the order of
// the sums these kernels must give the bits of the plain loop nest (gemm=false): across strides, paddings
// wider than the kernel, outputs narrower than a panel (panels spanning rows), row counts on both sides of
// the dispatch to the stencil nest, and every dtype; and conv2d passes the gate on its standard cases.
#include <gtest/gtest.h>

#include <cstdint>
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

struct Variant {
  std::string name;
  std::string compute;  // the contract's compute line (bench conv2d when empty)
  std::string inputs, outputs;
  std::vector<std::map<std::string, int64_t>> shapes;
  std::string expect;  // text the generated source must contain
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

CheckedContract contract_of(const Variant& v) {
  const fs::path conv = fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "conv2d.yaml";
  if (v.compute.empty())
    return testing_simd::contract_with(conv.string(), {{"[f32, bf16]", "[f32, bf16, f16]"}});
  std::string shapes;
  for (const auto& [name, value] : v.shapes.front())
    shapes += (shapes.empty() ? "" : ", ") + name + ": [" + std::to_string(value) + "]";
  const std::string yaml = "name: " + v.name + "\nlevel: 3\ndtypes: [f32, bf16, f16]\ninputs: " + v.inputs +
                           "\noutputs: " + v.outputs + "\ncompute: |\n  " + v.compute +
                           "\ncases:\n  standard: { shapes: { " + shapes + " } }\n";
  return check_contract(load_contract_text(yaml, v.name + ".yaml"));
}

class ImplicitGemm : public ::testing::TestWithParam<Variant> {};

TEST_P(ImplicitGemm, BitIdenticalToTheLoopNestOnExactSums) {
  const Variant& v = GetParam();
  const CheckedContract c = contract_of(v);
  std::string src, plain_src;
  const build::BuildResult gemm = lower_and_build(c, nlohmann::json::object(), &src),
                           plain = lower_and_build(c, {{"gemm", "false"}}, &plain_src);
  ASSERT_TRUE(gemm.ok()) << gemm.failure << "\n" << gemm.log;
  ASSERT_TRUE(plain.ok()) << plain.failure << "\n" << plain.log;
  EXPECT_NE(src.find("// contraction"), std::string::npos);
  EXPECT_NE(src.find("colv"), std::string::npos) << "the columns are decoded (not matmul's form)";
  EXPECT_NE(src.find(v.expect), std::string::npos) << "the generated source contains " << v.expect;
  EXPECT_EQ(plain_src.find("// contraction"), std::string::npos);
  const build::Kernel k_gemm(gemm.library), k_plain(plain.library);
  int checked = 0;
  for (const DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (const auto& shape : v.shapes) {
      const cases::Case k = cases::make_case(c, shape, dt);
      ASSERT_EQ(testing_simd::first_exact_difference(k_gemm, k_plain, c, k), "");
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3 * static_cast<int>(v.shapes.size()));
  if (!v.compute.empty()) return;
  for (const eval::CaseOutcome& o : eval::check_kernel(k_gemm, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
}

// conv2d {N, C, O, H, W, KH, KW, S, P}: 3 rows of C (the stencil nest) and 4, 7, 13 (the skeleton, last row
// tiles of 4, 1, 1); 1×1 and 5×5 kernels; strides 1–3; paddings 0, 1 and 4 (wider than the kernel: whole
// windows outside x); widths 1, 5, 11 (panels spanning many rows) and 40 (a row wider than a panel); output
// rows of 20 and of 30, 38 and 42 columns, on both sides of the bf16 dot product's choice between gathering
// a panel's bits per column and copying them per run (24 columns), the latter with padding at stride 1 and 2.
std::vector<std::map<std::string, int64_t>> conv_shapes() {
  std::vector<std::map<std::string, int64_t>> out;
  out.reserve(10);
  const std::vector<std::vector<int64_t>> v = {{1, 1, 3, 5, 5, 3, 3, 1, 1},   {1, 2, 4, 5, 11, 3, 3, 1, 1},
                                               {2, 3, 7, 11, 40, 3, 3, 2, 1}, {1, 5, 13, 9, 1, 1, 1, 1, 0},
                                               {2, 3, 7, 6, 5, 5, 5, 3, 4},   {1, 4, 13, 40, 40, 1, 3, 1, 0},
                                               {1, 3, 7, 8, 9, 3, 1, 2, 0},   {2, 8, 4, 1, 1, 1, 1, 1, 4},
                                               {1, 3, 7, 9, 40, 3, 3, 1, 2},  {2, 2, 5, 6, 60, 3, 3, 2, 1}};
  for (const auto& s : v) {
    out.push_back({{"N", s[0]},
                   {"C", s[1]},
                   {"O", s[2]},
                   {"H", s[3]},
                   {"W", s[4]},
                   {"KH", s[5]},
                   {"KW", s[6]},
                   {"S", s[7]},
                   {"P", s[8]}});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Forms, ImplicitGemm,
                         ::testing::Values(
                             // the padded window (bench conv2d, with bias)
                             Variant{"conv2d", "", "", "", conv_shapes(), "kwin[2 * k] ="},
                             // a 1×1 convolution: B is plain (no bounds), its columns two axes
                             Variant{"pointwise",
                                     "y[n, o, i, j] = sum(c: w[o, c] * x[n, c, i, j])",
                                     "{ x: [N, C, H, W], w: [O, C] }",
                                     "{ y: [N, O, H, W] }",
                                     {{{"N", 2}, {"C", 5}, {"O", 7}, {"H", 3}, {"W", 11}},
                                      {{"N", 1}, {"C", 9}, {"O", 13}, {"H", 5}, {"W", 40}}},
                                     "seg[nseg] = jn"},
                             // B read across its last axis: packed by evaluating it per column (no window)
                             Variant{"transposed",
                                     "y[n, o, i, j] = sum(c: w[o, c] * x[n, c, j, i])",
                                     "{ x: [N, C, W, H], w: [O, C] }",
                                     "{ y: [N, O, H, W] }",
                                     {{{"N", 2}, {"C", 5}, {"O", 7}, {"H", 3}, {"W", 11}},
                                      {{"N", 1}, {"C", 9}, {"O", 13}, {"H", 5}, {"W", 40}}},
                                     "bp[k * NR + c] = c < jn"},
                             // two reduction variables flattened, one column axis
                             Variant{"two_k",
                                     "y[i, j] = sum(c, d: a[i, c, d] * b[c, d, j])",
                                     "{ a: [M, C, D], b: [C, D, N] }",
                                     "{ y: [M, N] }",
                                     {{{"M", 7}, {"C", 3}, {"D", 5}, {"N", 40}},
                                      {{"M", 13}, {"C", 1}, {"D", 9}, {"N", 3}}},
                                     "seg[nseg] = jn"},
                             // A differs per batch: packed again when the batch changes
                             Variant{"batched_a",
                                     "y[n, o, i, j] = sum(c: w[n, o, c] * x[n, c, i, j])",
                                     "{ x: [N, C, H, W], w: [N, O, C] }",
                                     "{ y: [N, O, H, W] }",
                                     {{{"N", 3}, {"C", 5}, {"O", 7}, {"H", 2}, {"W", 9}},
                                      {{"N", 2}, {"C", 9}, {"O", 4}, {"H", 1}, {"W", 40}}},
                                     "ap_batch != bt) {"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace cake
