// Correctness of the reference interpreter on small contracts with hand-computed answers, its
// errors on data-dependent indices out of range, and its on-disk cache.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/error.h"
#include "core/paths.h"
#include "reference/reference.h"

namespace cake {
namespace {

std::string contract(const std::string& dtypes, const std::string& inputs, const std::string& outputs,
                     const std::string& compute, const std::string& shapes, const std::string& extra = "") {
  return "name: t\nlevel: 1\ndtypes: " + dtypes + "\ninputs: " + inputs + "\noutputs: " + outputs +
         "\ncompute: |\n  " + compute + "\ncases:\n  standard: { shapes: " + shapes + " }\n" + extra;
}

struct OpCase {
  CheckedContract c;
  cases::Case k;
};

OpCase setup(const std::string& text, std::map<std::string, int64_t> free, DType dt = DType::f32) {
  OpCase r{check_contract(load_contract_text(text, "t.yaml")), {}};
  r.k.dtype = dt;
  r.k.free = std::move(free);
  r.k.sizes = evaluate_sizes(r.c, r.k.free);
  for (const auto& p : r.c.contract.params) r.k.params.push_back(p.value);
  return r;
}

Tensor tensor(DType dt, Shape shape, std::vector<double> vals) {
  Tensor t(dt, std::move(shape));
  for (size_t i = 0; i < vals.size(); ++i) t.set(static_cast<int64_t>(i), vals[i]);
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

TEST(Reference, MatmulByHand) {
  OpCase r = setup(contract("[f32]", "{ a: [M, K], b: [K, N] }", "{ y: [M, N] }", "y[i, j] = sum(k: a[i, k] * b[k, j])",
                         "{ M: [2], K: [3], N: [2] }"),
                {{"M", 2}, {"K", 3}, {"N", 2}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  in.push_back(tensor(DType::f32, {3, 2}, {7, 8, 9, 10, 11, 12}));
  auto out = reference::run(r.c, r.k, in);
  EXPECT_EQ(values(out[0]), (std::vector<double>{58, 64, 139, 154}));
}

TEST(Reference, SoftmaxRowsSumToOne) {
  OpCase r = setup(contract("[f32]", "{ x: [N, D] }", "{ y: [N, D] }",
                         "m[n] = max(d: x[n, d])\n  s[n] = sum(d: exp(x[n, d] - m[n]))\n  y[n, d] = exp(x[n, d] - m[n]) / s[n]",
                         "{ N: [2], D: [3] }"),
                {{"N", 2}, {"D", 3}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {2, 3}, {1, 2, 3, 1000, 1000, 1000}));
  auto y = values(reference::run(r.c, r.k, in)[0]);
  double e1 = std::exp(-2.0), e2 = std::exp(-1.0), z = e1 + e2 + 1;
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(e1 / z));
  EXPECT_FLOAT_EQ(y[2], static_cast<float>(1 / z));
  EXPECT_FLOAT_EQ(y[3], 1.0f / 3);  // stable: no overflow at 1000
}

TEST(Reference, CumsumTriangularRange) {
  OpCase r = setup(contract("[f32]", "{ x: [N, D] }", "{ y: [N, D] }", "y[n, j] = sum(k in 0..j + 1: x[n, k])",
                         "{ N: [2], D: [4] }"),
                {{"N", 2}, {"D", 4}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {2, 4}, {1, 2, 3, 4, 10, 20, 30, 40}));
  EXPECT_EQ(values(reference::run(r.c, r.k, in)[0]), (std::vector<double>{1, 3, 6, 10, 10, 30, 60, 100}));
}

TEST(Reference, ArgmaxFirstOccurrenceAndNaN) {
  OpCase r = setup(contract("[f32]", "{ x: [N, D] }", "{ y: \"i64[N]\" }", "y[n] = argmax(d: x[n, d])", "{ N: [3], D: [4] }"),
                {{"N", 3}, {"D", 4}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {3, 4}, {1, 5, 5, 2, -1, -3, -1, -2, 0, NAN, 9, NAN}));
  EXPECT_EQ(values(reference::run(r.c, r.k, in)[0]), (std::vector<double>{1, 0, 1}));
}

TEST(Reference, PaddedWindowMaxPool) {
  OpCase q = setup(contract("[f32]", "{ x: [L] }", "{ y: [Lo] }", "y[i] = max(r in 0..3: x?(-inf)[i*2 + r - 1])",
                         "{ L: [5] }", "sizes: { Lo: (L + 2 - 3) / 2 + 1 }\n"),
                {{"L", 5}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {5}, {3, -1, 4, -1, 5}));
  // windows: [pad, 3, -1], [-1, 4, -1], [-1, 5, pad]
  EXPECT_EQ(values(reference::run(q.c, q.k, in)[0]), (std::vector<double>{3, 4, 5}));
}

TEST(Reference, GatherAndScatter) {
  OpCase g = setup(contract("[f32]", "{ t: [V, D], ids: \"i64[N]\" }", "{ y: [N, D] }", "y[i, j] = t[ids[i], j]",
                         "{ V: [3], D: [2], N: [4] }", "  values: { ids: randint(0, V) }\n"),
                {{"V", 3}, {"D", 2}, {"N", 4}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {3, 2}, {0, 1, 10, 11, 20, 21}));
  in.push_back(tensor(DType::i64, {4}, {2, 0, 2, 1}));
  EXPECT_EQ(values(reference::run(g.c, g.k, in)[0]), (std::vector<double>{20, 21, 0, 1, 20, 21, 10, 11}));

  OpCase s = setup(contract("[f32]", "{ src: [N, D], idx: \"i64[N]\" }", "{ out: [M, D] }", "out[idx[i], j] += src[i, j]",
                         "{ N: [3], D: [2], M: [2] }", "  values: { idx: randint(0, M) }\n"),
                {{"N", 3}, {"D", 2}, {"M", 2}});
  std::vector<Tensor> sin;
  sin.push_back(tensor(DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}));
  sin.push_back(tensor(DType::i64, {3}, {1, 1, 0}));
  EXPECT_EQ(values(reference::run(s.c, s.k, sin)[0]), (std::vector<double>{5, 6, 4, 6}));
}

TEST(Reference, DataDependentIndexOutOfRangeIsAnError) {
  OpCase g = setup(contract("[f32]", "{ t: [V], ids: \"i64[N]\" }", "{ y: [N] }", "y[i] = t[ids[i]]", "{ V: [3], N: [2] }",
                         "  values: { ids: randint(0, V) }\n"),
                {{"V", 3}, {"N", 2}});
  std::vector<Tensor> in;
  in.push_back(tensor(DType::f32, {3}, {1, 2, 3}));
  in.push_back(tensor(DType::i64, {2}, {0, 7}));
  try {
    reference::run(g.c, g.k, in);
    FAIL() << "read outside the table";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("t.yaml:7:10"), std::string::npos) << m;
    EXPECT_NE(m.find("index 7 of 't'"), std::string::npos) << m;
  }
}

TEST(Reference, RoundsOnceToTheOutputDtype) {
  // Inputs 1, 2^-8, 2^-8 in bf16: summing in bf16 would round 1 + 2^-8 back to 1 (a tie, to even) twice;
  // the f64 sum 1 + 2^-7 is exact in bf16, and only the final value is rounded.
  OpCase r = setup(contract("[bf16]", "{ x: [N] }", "{ y: [] }", "y = sum(i: x[i])", "{ N: [3] }"), {{"N", 3}}, DType::bf16);
  std::vector<Tensor> in;
  in.push_back(tensor(DType::bf16, {3}, {1.0, 0.00390625, 0.00390625}));
  EXPECT_EQ(values(reference::run(r.c, r.k, in)[0])[0], 1.0078125);
}

TEST(Reference, IntegerDivisionFloorsAndCastSaturates) {
  OpCase r = setup(contract("[i32]", "{ x: [N] }", "{ y: [N], z: \"i8[N]\" }", "y[i] = x[i] / 2\n  z[i] = cast<i8>(x[i] * 100)",
                         "{ N: [3] }"),
                {{"N", 3}}, DType::i32);
  std::vector<Tensor> in;
  in.push_back(tensor(DType::i32, {3}, {7, -7, 2}));
  auto out = reference::run(r.c, r.k, in);
  EXPECT_EQ(values(out[0]), (std::vector<double>{3, -4, 1}));
  EXPECT_EQ(values(out[1]), (std::vector<double>{127, -128, 127}));
}

TEST(Reference, CacheServesTheSameOutputs) {
  auto dir = std::filesystem::temp_directory_path() / ("cake-ref-cache-" + std::to_string(::getpid()));
  ::setenv("CAKE_CACHE_DIR", dir.c_str(), 1);
  CheckedContract c = load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/softmax.yaml");
  auto ks = cases::make_cases(c, cases::Set::Standard);
  const cases::Case& k = ks[3];
  auto fresh = reference::run(c, k, cases::make_inputs(c, k));
  auto first = reference::cached_outputs(c, k);
  size_t files = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir); it != std::filesystem::recursive_directory_iterator(); ++it)
    files += it->is_regular_file();
  EXPECT_EQ(files, 1u);
  auto second = reference::cached_outputs(c, k);
  ASSERT_EQ(second.size(), fresh.size());
  EXPECT_EQ(values(second[0]), values(fresh[0]));
  EXPECT_EQ(values(first[0]), values(fresh[0]));
  // A corrupt entry is recomputed, not trusted.
  for (auto it = std::filesystem::recursive_directory_iterator(dir); it != std::filesystem::recursive_directory_iterator(); ++it)
    if (it->is_regular_file()) write_file_atomic(it->path(), "garbage");
  EXPECT_EQ(values(reference::cached_outputs(c, k)[0]), values(fresh[0]));
  std::filesystem::remove_all(dir);
  ::unsetenv("CAKE_CACHE_DIR");
}

}  // namespace
}  // namespace cake
