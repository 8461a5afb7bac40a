// The simd track's copies: statements that store a value as read (a gather, a permutation). A permuting
// copy (permute's y[b, h, s, d] = x[b, s, h, d]) runs its outer loops in the source's layout order while the
// source's second-innermost axis has at most 16 points, in the output's otherwise: every element must land
// where the permutation says, bit for bit, NaNs included, in every dtype, in the serial and the parallel
// copies. A copy with its rows contiguous on both sides copies a row shorter than 64 bytes as one masked
// block (cake_copy_short_row): it must give the bits of the plain loops (vectorize=false, no block copy) on
// rows shorter than, equal to and longer than a block (the last keep the loop). And only the statements of
// those forms get either.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;

std::string ops_file(const std::string& name) {
  return (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (name + ".yaml")).string();
}

const std::string kPermute = ops_file("permute");
constexpr const char* kSourceOrder = "the source's order";
constexpr const char* kBlockCopy = "the row as one masked block copy";

TEST(Copies, PermuteTakesTheSourcesOrderAndMovesEveryElementWhereItBelongs) {
  const CheckedContract c = load_and_check(kPermute);
  std::string src;
  const build::BuildResult r = testing_simd::lower_and_build(c, nlohmann::json::object(), &src);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  EXPECT_NE(src.find("if (s_H <= 16) { // the source's order"), std::string::npos) << src;
  const build::Kernel k(r.library);
  for (const DType dt : c.contract.dtypes) {
    // H of 3 and 16 take the source's order, 17 and 40 the output's; D = 1 the unit rows; 2 x 300 x 40 x 5
    // points the parallel region.
    for (const int64_t h : {3, 16, 17, 40}) {
      for (const auto& [s, d] : std::vector<std::pair<int64_t, int64_t>>{{7, 1}, {7, 63}, {300, 5}}) {
        const cases::Case kc = cases::make_case(c, {{"B", 2}, {"S", s}, {"H", h}, {"D", d}}, dt);
        std::vector<Tensor> in = cases::make_inputs(c, kc);
        for (int64_t i = 3; i < in[0].numel(); i += 101) in[0].set(i, std::nan(""));
        std::vector<Tensor> out = cases::make_outputs(c, kc);
        ASSERT_EQ(k.run(in, out, cases::kernel_params(c, kc)), 0) << kc.describe();
        int64_t wrong = 0, first = -1;
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t hh = 0; hh < h; ++hh)
            for (int64_t ss = 0; ss < s; ++ss)
              for (int64_t dd = 0; dd < d; ++dd) {
                const int64_t at = ((b * h + hh) * s + ss) * d + dd, from = ((b * s + ss) * h + hh) * d + dd;
                const double got = out[0].get(at), want = in[0].get(from);
                if (std::isnan(got) ? !std::isnan(want)
                                    : std::bit_cast<uint64_t>(got) != std::bit_cast<uint64_t>(want)) {
                  if (first < 0) first = at;
                  ++wrong;
                }
              }
        EXPECT_EQ(wrong, 0) << kc.describe() << ": first wrong output element " << first;
      }
    }
  }
}

// Rows of 1 (the copy for inner sizes of 1), 7 and 15 (one masked block), 16, 32 and 33 (GCC's loop for
// 4-byte elements; one masked block, or not, for 2-byte ones), 100 (the loop).
const int64_t kRows[] = {1, 7, 15, 16, 32, 33, 100};

void expect_same_bits(const std::string& op, const std::map<std::string, int64_t>& shape, const char* row) {
  const CheckedContract c = load_and_check(ops_file(op));
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, kBlockCopy));
  const build::Kernel on(p.on.library), off(p.off.library);
  for (const DType dt : c.contract.dtypes) {
    for (const int64_t d : kRows) {
      std::map<std::string, int64_t> sizes = shape;
      sizes[row] = d;
      const cases::Case k = cases::make_case(c, sizes, dt);
      const std::string diff = testing_simd::first_difference(on, off, c, k);
      EXPECT_TRUE(diff.empty()) << op << " " << k.describe() << ": " << diff;
    }
  }
}

TEST(Copies, BlockCopyIndexSelectGivesTheBitsOfThePlainLoops) {
  expect_same_bits("index_select", {{"V", 50}, {"K", 300}}, "D");
}

TEST(Copies, BlockCopyEmbeddingGivesTheBitsOfThePlainLoops) {
  const CheckedContract c = load_and_check(ops_file("embedding"));
  std::map<std::string, int64_t> shape;
  for (const SizeInfo& z : c.sizes)
    if (z.free) shape[z.name] = 40;
  ASSERT_TRUE(shape.count("D")) << "embedding's row size is no longer D";
  expect_same_bits("embedding", shape, "D");
}

TEST(Copies, BlockCopyPermuteGivesTheBitsOfThePlainLoops) {
  // 2 x 300 x 3 rows: the parallel region and the source's order; 17 heads: the output's order.
  expect_same_bits("permute", {{"B", 2}, {"S", 300}, {"H", 3}}, "D");
  expect_same_bits("permute", {{"B", 1}, {"S", 20}, {"H", 17}}, "D");
}

// permute edited: which forms take the source's order and the block copy.
TEST(Copies, OnlyTheirFormsGetTheSourcesOrderOrTheBlockCopy) {
  struct Form {
    const char* what;
    testing_simd::Edits edits;
    bool source_order, block_copy;
  };
  const std::vector<Form> forms = {
      {"permute", {}, true, true},
      {"the identity: nothing to reorder",
       {{"outputs: { y: [B, H, S, D] }", "outputs: { y: [B, S, H, D] }"},
        {"y[b, h, s, d] = x[b, s, h, d]", "y[b, s, h, d] = x[b, s, h, d]"}},
       false,
       true},
      {"the innermost axes transposed: no row is contiguous on both sides",
       {{"outputs: { y: [B, H, S, D] }", "outputs: { y: [B, H, D, S] }"},
        {"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, d, s] = x[b, s, h, d]"}},
       false,
       false},
      {"arithmetic on the value: not a copy",
       {{"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, s, d] = 2 * x[b, s, h, d]"}},
       false,
       false},
      {"the row read backwards",
       {{"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, s, d] = x[b, s, h, D - 1 - d]"}},
       false,
       false},
  };
  for (const Form& f : forms) {
    const std::string src =
        testing_simd::lower_simd(testing_simd::contract_with(kPermute, f.edits), nlohmann::json::object())
            .files.front()
            .text;
    EXPECT_EQ(src.find(kSourceOrder) != std::string::npos, f.source_order) << f.what;
    EXPECT_EQ(src.find(kBlockCopy) != std::string::npos, f.block_copy) << f.what;
  }
}

}  // namespace
}  // namespace cake
