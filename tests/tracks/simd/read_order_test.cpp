// The simd track's permuting copies (permute's y[b, h, s, d] = x[b, s, h, d]) run their outer loops in the
// source's layout order while the source's second-innermost axis is short (kReadOrderMaxStreams points), in
// the output's otherwise. Either way every element lands where the permutation says, bit for bit, NaNs
// included, in every dtype, in the serial and the parallel copies; and only a statement that is one read at
// its own points permuted, rows kept innermost, gets the choice.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
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

const std::string kPermute = (fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "permute.yaml").string();

TEST(ReadOrder, PermuteTakesTheSourcesOrderAndMovesEveryElementWhereItBelongs) {
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

TEST(ReadOrder, OnlyAPermutingCopyWithItsRowsInnermostGetsTheChoice) {
  const auto source = [](const testing_simd::Edits& edits) {
    return testing_simd::lower_simd(testing_simd::contract_with(kPermute, edits), nlohmann::json::object())
        .files.front()
        .text;
  };
  // The identity: nothing to choose.
  EXPECT_EQ(source({{"outputs: { y: [B, H, S, D] }", "outputs: { y: [B, S, H, D] }"},
                    {"y[b, h, s, d] = x[b, s, h, d]", "y[b, s, h, d] = x[b, s, h, d]"}})
                .find("the source's order"),
            std::string::npos);
  // The row moves (the source's innermost axis is not the output's): no contiguous row to keep.
  EXPECT_EQ(source({{"outputs: { y: [B, H, S, D] }", "outputs: { y: [B, H, D, S] }"},
                    {"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, d, s] = x[b, s, h, d]"}})
                .find("the source's order"),
            std::string::npos);
  // Not a plain read.
  EXPECT_EQ(source({{"y[b, h, s, d] = x[b, s, h, d]", "y[b, h, s, d] = 2 * x[b, s, h, d]"}})
                .find("the source's order"),
            std::string::npos);
}

}  // namespace
}  // namespace cake
