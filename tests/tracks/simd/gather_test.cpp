// The simd track's gathers (index_select's x[ids[k], d], embedding's table[ids[b, s], d]): a data-dependent
// index that does not vary along the row is read and range-checked once per row, before the row's
// vectorized loop (a branch inside it kept GCC from vectorizing the f16 copy: 8.6 -> 1.2 ms at D = 512,
// K = 8192). An index out of range in any row, or negative, still returns CAKE_ERR_INDEX, on the unit-row
// path (D = 1), the serial copy and the parallel one, in every dtype. Gathered, permuted and broadcast
// elements move as bits.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>

#include "cases/cases.h"
#include "contract/contract.h"
#include "kernel_pair.h"

namespace cake {
namespace {

namespace fs = std::filesystem;
using testing_simd::lower_and_build;

// A broadcast copy: x[n] does not vary along the row, so its read is hoisted out of the loop over d.
const char* kBroadcast = R"(name: broadcast
level: 1
dtypes: [f16, bf16]
inputs:  { x: [N] }
outputs: { y: [N, D] }
compute: |
  y[n, d] = x[n]
cases:
  standard: { shapes: { N: [5], D: [33] } }
  values:   { x: normal(0, 1) }
)";

CheckedContract load_op(const std::string& name) {
  if (name == "broadcast") return check_contract(load_contract_text(kBroadcast));
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (name + ".yaml")).string());
}

// The simd kernel of c at default knobs; nullopt (and a test failure) when it does not build.
std::optional<build::Kernel> default_kernel(const CheckedContract& c) {
  std::string src;
  const build::BuildResult r = lower_and_build(c, nlohmann::json::object(), &src);
  EXPECT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  if (!r.ok()) return std::nullopt;
  return build::Kernel(r.library);
}

TEST(Gather, TheIndexIsCheckedBeforeTheRowLoop) {
  std::string src;
  ASSERT_TRUE(lower_and_build(load_op("index_select"), nlohmann::json::object(), &src).ok());
  const size_t body = src.find("int compute(");
  const size_t rows = src.find("} else {", src.find("inner sizes of 1", body));  // rows of D elements
  ASSERT_NE(rows, std::string::npos);
  const size_t check = src.find("CAKE_ERR_INDEX", rows), simd = src.find("#pragma omp simd", rows);
  ASSERT_NE(check, std::string::npos);
  ASSERT_NE(simd, std::string::npos);
  EXPECT_LT(check, simd) << src.substr(rows, simd - rows + 200);
}

TEST(Gather, AnIndexOutOfRangeInAnyRowIsReported) {
  for (const std::string op : {"index_select", "embedding"}) {
    const CheckedContract c = load_op(op);
    const std::optional<build::Kernel> k = default_kernel(c);
    ASSERT_TRUE(k) << op;
    // 7 rows: the serial copy; 20000 rows of 8: the parallel one; D = 1: the unit rows
    for (const auto& [rows, d] : {std::pair<int64_t, int64_t>{7, 1}, {7, 33}, {20000, 1}, {20000, 8}}) {
      for (const DType dt : {DType::f32, DType::f16, DType::bf16}) {
        std::map<std::string, int64_t> shape =
            op == "index_select" ? std::map<std::string, int64_t>{{"V", 13}, {"K", rows}, {"D", d}}
                                 : std::map<std::string, int64_t>{{"V", 13}, {"B", 1}, {"S", rows}, {"D", d}};
        const cases::Case kc = cases::make_case(c, shape, dt);
        std::vector<Tensor> in = cases::make_inputs(c, kc);
        const size_t ids = in[0].dtype() == DType::i64 ? 0 : 1;
        const std::vector<double> params = cases::kernel_params(c, kc);
        std::vector<Tensor> out = cases::make_outputs(c, kc);
        ASSERT_EQ(k->run(in, out, params), 0) << op << " " << kc.describe();
        for (const auto& [at, bad] : {std::pair<int64_t, int64_t>{0, 13}, {rows - 1, 13}, {rows / 2, -1}}) {
          std::vector<Tensor> bad_in = cases::make_inputs(c, kc);
          static_cast<int64_t*>(bad_in[ids].data())[at] = bad;
          EXPECT_EQ(k->run(bad_in, out, params), CAKE_ERR_INDEX)
              << op << " " << kc.describe() << ": ids[" << at << "] = " << bad;
        }
      }
    }
  }
}

// A gathered, permuted or broadcast element is stored as it was read, bits and all: a signalling NaN keeps
// its payload (as libtorch's copy keeps it), an f16 subnormal stays exact, with no round trip through the
// compute type.
TEST(Gather, ElementsMoveAsBits) {
  for (const std::string op : {"index_select", "permute", "broadcast"}) {
    const CheckedContract c = load_op(op);
    const std::optional<build::Kernel> k = default_kernel(c);
    ASSERT_TRUE(k) << op;
    for (const DType dt : {DType::f16, DType::bf16}) {
      const std::map<std::string, int64_t> shape =
          op == "index_select" ? std::map<std::string, int64_t>{{"V", 13}, {"K", 40}, {"D", 33}}
          : op == "permute"    ? std::map<std::string, int64_t>{{"B", 2}, {"H", 3}, {"S", 5}, {"D", 33}}
                               : std::map<std::string, int64_t>{{"N", 40}, {"D", 33}};
      const cases::Case kc = cases::make_case(c, shape, dt);
      std::vector<Tensor> in = cases::make_inputs(c, kc);
      Tensor& x = in[0].dtype() == DType::i64 ? in[1] : in[0];
      auto* bits = static_cast<uint16_t*>(x.data());
      for (int64_t i = 0; i < x.numel(); ++i) {  // signalling NaNs with payloads, subnormals, both signs
        const auto n = static_cast<uint16_t>(i % 5);
        if (n == 0) bits[i] = dt == DType::f16 ? uint16_t(0x7c01u + i % 0x1ff) : uint16_t(0x7f81u + i % 0x3f);
        if (n == 1) bits[i] = uint16_t(0x8001u + i % 0x3ff);
      }
      std::vector<Tensor> out = cases::make_outputs(c, kc);
      ASSERT_EQ(k->run(in, out, cases::kernel_params(c, kc)), 0);
      std::multiset<uint16_t> got, want;  // every output element is an input element, moved as it was
      const auto* y = static_cast<const uint16_t*>(out[0].data());
      for (int64_t i = 0; i < out[0].numel(); ++i) got.insert(y[i]);
      std::set<uint16_t> from(bits, bits + x.numel());
      for (const uint16_t g : got) ASSERT_TRUE(from.count(g)) << op << " " << dtype_name(dt) << ": " << g;
      if (op == "broadcast") {  // row n holds x[n] throughout
        for (int64_t i = 0; i < out[0].numel(); ++i)
          ASSERT_EQ(y[i], bits[i / 33]) << dtype_name(dt) << " " << i;
      }
      if (op == "permute") {  // a permutation moves each element once
        want.insert(bits, bits + x.numel());
        EXPECT_EQ(got, want) << op << " " << dtype_name(dt);
      }
    }
  }
}

}  // namespace
}  // namespace cake
