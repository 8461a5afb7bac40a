// The simd track's overlapped row tails: a loop storing 1-byte elements (quantize_int8's q) runs rows of
// 64 or more as chunks of 64, the last chunk overlapping the one before, instead of leaving up to 63
// elements of a row to scalar code. Storing an element twice stores the same value, so the kernel must give
// the bits of the same statements without vector pragmas (vectorize=false), NaNs and infinities included,
// on rows around and between multiples of 64, in the serial and the parallel paths, and pass the gate on the
// standard cases.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/conformance.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::first_difference;

TEST(OverlappedTail, QuantizeRowsBitIdenticalToTheUnvectorizedLoop) {
  const CheckedContract c =
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "quantize_int8.yaml").string());
  const testing_simd::VectorizePair p = testing_simd::build_vectorize_pair(c);
  ASSERT_TRUE(testing_simd::built_with_path(p, "ov0 + 64"));
  const build::Kernel k_on(p.on.library), k_off(p.off.library);

  for (const eval::CaseOutcome& o : eval::check_kernel(k_on, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();

  // Rows shorter than a chunk, of one chunk, just over one, between and at multiples; 3 rows take the
  // serial copy, 700 rows of 64 or more the parallel region.
  for (const int64_t d : {1, 63, 64, 65, 127, 128, 200}) {
    for (const int64_t n : {3, 700}) {
      for (const DType dt : {DType::f32, DType::bf16}) {
        const cases::Case k = cases::make_case(c, {{"N", n}, {"D", d}}, dt);
        const std::string diff = first_difference(k_on, k_off, c, k);
        ASSERT_TRUE(diff.empty()) << diff;
      }
    }
  }
}

}  // namespace
}  // namespace cake
