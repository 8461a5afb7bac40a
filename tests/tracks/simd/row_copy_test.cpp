// The simd track's short-row copies: a statement that moves bits (a gather, a permutation) with its rows
// contiguous on both sides copies a row shorter than 64 bytes as one masked block (cake_copy_short_row)
// instead of GCC's loop and its scalar epilogue. It must give the bits of the plain loops (vectorize=false,
// no block copy), NaNs included, in every dtype, on rows shorter than, equal to and longer than a block (the
// last keep the loop), and only such statements get it.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

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

// Rows of 1 (the unit copy), 7 and 15 (a masked block only, for 4-byte elements), 16, 32 and 33 (whole
// blocks, and a tail), 100.
const int64_t kRows[] = {1, 7, 15, 16, 32, 33, 100};

void expect_same_bits(const std::string& op, const std::map<std::string, int64_t>& shape, const char* row) {
  const CheckedContract c = load_and_check(ops_file(op));
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, "the row as one masked block copy"));
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

TEST(RowCopy, IndexSelectGivesTheBitsOfThePlainLoops) {
  expect_same_bits("index_select", {{"V", 50}, {"K", 300}}, "D");
}

TEST(RowCopy, EmbeddingGivesTheBitsOfThePlainLoops) {
  const CheckedContract c = load_and_check(ops_file("embedding"));
  std::map<std::string, int64_t> shape;
  for (const SizeInfo& z : c.sizes)
    if (z.free) shape[z.name] = 40;
  ASSERT_TRUE(shape.count("D")) << "embedding's row size is no longer D";
  expect_same_bits("embedding", shape, "D");
}

TEST(RowCopy, PermuteGivesTheBitsOfThePlainLoops) {
  // 2 x 300 x 3 rows: the parallel region and the source's order; 17 heads: the output's order.
  expect_same_bits("permute", {{"B", 2}, {"S", 300}, {"H", 3}}, "D");
  expect_same_bits("permute", {{"B", 1}, {"S", 20}, {"H", 17}}, "D");
}

TEST(RowCopy, OnlyACopyOfContiguousRowsIsABlockCopy) {
  const auto source = [](const testing_simd::Edits& edits) {
    return testing_simd::lower_simd(testing_simd::contract_with(ops_file("permute"), edits),
                                    nlohmann::json::object())
        .files.front()
        .text;
  };
  EXPECT_NE(source({}).find("one masked block copy"), std::string::npos);
  // Arithmetic on the value: not a copy of bits.
  EXPECT_EQ(source({{"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, s, d] = 2 * x[b, s, h, d]"}})
                .find("one masked block copy"),
            std::string::npos);
  // The source's row is not the output's (a transposition of the innermost axes).
  EXPECT_EQ(source({{"outputs: { y: [B, H, S, D] }", "outputs: { y: [B, H, D, S] }"},
                    {"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, d, s] = x[b, s, h, d]"}})
                .find("one masked block copy"),
            std::string::npos);
  // The row read backwards.
  EXPECT_EQ(source({{"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, s, d] = x[b, s, h, D - 1 - d]"}})
                .find("one masked block copy"),
            std::string::npos);
}

}  // namespace
}  // namespace cake
