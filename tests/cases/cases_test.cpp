// Case sets: deterministic, sized as the contract says, covering every dtype, listed value and
// extreme, awkward hidden shapes, and always inside constraints and limits.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "cases/cases.h"
#include "contract/contract.h"

namespace cake {
namespace {

CheckedContract op(const std::string& name) {
  return load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/" + name + ".yaml");
}

TEST(Cases, CountsAndDeterminism) {
  CheckedContract c = op("rms_norm");
  auto a = cases::make_cases(c, cases::Set::Standard);
  auto b = cases::make_cases(c, cases::Set::Standard);
  auto h = cases::make_cases(c, cases::Set::Hidden);
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(h.size(), 80u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].free, b[i].free);
    EXPECT_EQ(a[i].seed, b[i].seed);
    EXPECT_EQ(a[i].dtype, b[i].dtype);
  }
  auto x1 = cases::make_inputs(c, a[4]), x2 = cases::make_inputs(c, a[4]);
  ASSERT_EQ(x1[0].nbytes(), x2[0].nbytes());
  EXPECT_EQ(std::memcmp(x1[0].data(), x2[0].data(), x1[0].nbytes()), 0);
}

TEST(Cases, StandardCoversListedValuesExtremesAndDtypes) {
  CheckedContract c = op("rms_norm");
  auto ks = cases::make_cases(c, cases::Set::Standard);
  std::set<int64_t> n, d;
  std::set<DType> dts;
  for (const auto& k : ks) {
    n.insert(k.free.at("N"));
    d.insert(k.free.at("D"));
    dts.insert(k.dtype);
    EXPECT_LE(cases::case_bytes(c, k), c.contract.limits.max_bytes);
  }
  for (const auto& r : c.contract.standard.shapes)
    for (int64_t v : r.values) EXPECT_TRUE((r.symbol == "N" ? n : d).count(v)) << r.symbol << "=" << v;
  EXPECT_EQ(dts.size(), c.contract.dtypes.size());
}

TEST(Cases, HiddenIncludesAwkwardShapes) {
  CheckedContract c = op("softmax");
  auto ks = cases::make_cases(c, cases::Set::Hidden);
  bool one = false, prime = false, odd16 = false;
  auto is_prime = [](int64_t v) {
    if (v < 2) return false;
    for (int64_t q = 2; q * q <= v; ++q)
      if (v % q == 0) return false;
    return true;
  };
  for (const auto& k : ks)
    for (const auto& [s, v] : k.free) {
      one |= v == 1;
      prime |= v > 2 && is_prime(v);
      odd16 |= v > 16 && (v % 16 == 1 || v % 16 == 15);
    }
  EXPECT_TRUE(one);
  EXPECT_TRUE(prime);
  EXPECT_TRUE(odd16);
}

TEST(Cases, EveryBenchCaseSatisfiesConstraintsAndLimits) {
  for (const auto& e : std::filesystem::directory_iterator(std::string(CAKE_SOURCE_DIR) + "/bench/ops")) {
    if (e.path().extension() != ".yaml") continue;
    CheckedContract c = load_and_check(e.path().string());
    for (auto set : {cases::Set::Standard, cases::Set::Hidden})
      for (const auto& k : cases::make_cases(c, set)) {
        SCOPED_TRACE(c.contract.name + " " + k.id() + " " + k.describe());
        for (const auto& con : c.contract.constraints) EXPECT_NE(eval_size_expr(*con, k.sizes), 0);
        for (int64_t s : k.sizes) EXPECT_GE(s, 0);
        EXPECT_LE(cases::case_bytes(c, k), c.contract.limits.max_bytes);
        EXPECT_LE(cases::case_flops(c, k), c.contract.limits.max_flops);
      }
  }
}

TEST(Cases, ValuesFollowTheirDistributions) {
  CheckedContract c = op("rms_norm");
  auto ks = cases::make_cases(c, cases::Set::Standard);
  const cases::Case* big = &ks[0];
  for (const auto& k : ks)
    if (cases::case_bytes(c, k) > cases::case_bytes(c, *big)) big = &k;
  auto in = cases::make_inputs(c, *big);
  // x ~ normal(0, 1): mean near 0, variance near 1.
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < in[0].numel(); ++i) {
    double v = in[0].get(i);
    s += v;
    s2 += v * v;
  }
  double n = static_cast<double>(in[0].numel());
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  // w ~ uniform(0.5, 1.5)
  for (int64_t i = 0; i < in[1].numel(); ++i) {
    EXPECT_GE(in[1].get(i), 0.5);
    EXPECT_LE(in[1].get(i), 1.5);
  }
}

TEST(Cases, IndexInputsStayInRange) {
  CheckedContract c = op("embedding");
  for (const auto& k : cases::make_cases(c, cases::Set::Standard)) {
    auto in = cases::make_inputs(c, k);
    for (size_t t = 0; t < in.size(); ++t) {
      const TensorInfo& ti = c.tensors[static_cast<size_t>(c.input_ids()[t])];
      if (!ti.index_only) continue;
      int64_t v_extent = k.free.count("V") ? k.free.at("V") : 0;
      for (int64_t i = 0; i < in[t].numel(); ++i) {
        ASSERT_GE(in[t].get(i), 0);
        if (v_extent) {
          ASSERT_LT(in[t].get(i), v_extent);
        }
      }
    }
  }
}

}  // namespace
}  // namespace cake
