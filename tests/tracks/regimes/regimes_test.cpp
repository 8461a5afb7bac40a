// Regime composites: the split searches (by I/O bytes or a size symbol, by dtype) over measured cases (no
// timing: hand-made cases), a composite of a simd and a halide kernel that must pass the gate on every
// standard case, each regime holding some of them, and composites with a refusing part that show each case
// runs the variant its route (I/O bytes, a size, or dtype) names.
#include "tracks/regimes/regimes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "build/build_service.h"
#include "build/kernel.h"
#include "contract/contract.h"
#include "core/error.h"
#include "eval/conformance.h"
#include "target/machine.h"

namespace cake::tracks {
namespace {

using nlohmann::json;

json cases_of(const std::vector<std::pair<double, double>>& io_and_eff) {
  json out = json::array();
  for (const auto& [io, e] : io_and_eff)
    out.push_back({{"io_bytes", io}, {"verdict", "pass"}, {"t_floor_s", e}, {"t_cand_s", 1.0}});
  return out;
}

json with_dtypes(json cases, const std::vector<std::string>& dtypes) {
  for (size_t i = 0; i < cases.size(); ++i) cases[i]["dtype"] = dtypes[i];
  return cases;
}

CheckedContract softmax() {
  return load_and_check((std::filesystem::path(CAKE_SOURCE_DIR) / "bench" / "ops" / "softmax.yaml").string());
}

TEST(BestSplit, GivesEachRegimeToTheVariantThatWinsIt) {
  // a is better on the two small cases, b on the two large ones; the order of the cases does not matter.
  const json a = cases_of({{1e6, 0.2}, {8, 0.9}, {64, 0.8}, {1e7, 0.3}});
  const json b = cases_of({{1e6, 0.7}, {8, 0.1}, {64, 0.2}, {1e7, 0.6}});
  const auto s = best_split(a, b);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->a_small);
  EXPECT_EQ(s->small_cases, 2);
  EXPECT_EQ(s->size, "");
  EXPECT_GT(s->below, 64);
  EXPECT_LE(s->below, 1000000);
  EXPECT_DOUBLE_EQ(s->efficiency, (0.9 + 0.8 + 0.7 + 0.6) / 4);
  const auto r = best_split(b, a);  // the other way round
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->a_small);
  EXPECT_EQ(r->below, s->below);
}

TEST(BestSplit, SplitsByASizeWhereTheBytesCannot) {
  // a wins where S is small, whatever the bytes: no cut of the bytes separates its two cases from b's.
  json a = cases_of({{100, 0.9}, {1e6, 0.8}, {1e3, 0.1}, {1e5, 0.2}});
  json b = cases_of({{100, 0.1}, {1e6, 0.2}, {1e3, 0.7}, {1e5, 0.6}});
  const std::vector<int> s_of{1, 7, 128, 1024};
  for (size_t i = 0; i < a.size(); ++i) {
    a[i]["sizes"] = {{"S", s_of[i]}, {"D", 64}};
    b[i]["sizes"] = a[i]["sizes"];
  }
  const auto bytes = best_split(a, b);  // no size asked for: the bytes' best
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size, "");
  const auto s = best_split(a, b, {"D", "S"});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size, "S");
  EXPECT_TRUE(s->a_small);
  EXPECT_EQ(s->small_cases, 2);
  EXPECT_GT(s->below, 7);
  EXPECT_LE(s->below, 128);
  EXPECT_DOUBLE_EQ(s->efficiency, (0.9 + 0.8 + 0.7 + 0.6) / 4);
  EXPECT_GT(s->efficiency, bytes->efficiency);
  a[2]["sizes"].erase("S");  // a size that one case lacks is not split on
  EXPECT_EQ(best_split(a, b, {"S"})->size, "");
}

TEST(BestSplit, NeverCutsBetweenCasesOfOneSizeAndNeedsEveryCasePassing) {
  const json same = cases_of({{64, 0.9}, {64, 0.1}});
  EXPECT_FALSE(best_split(same, same));  // one size: no threshold separates anything
  json failing = cases_of({{8, 0.9}, {64, 0.1}});
  failing[1]["verdict"] = "fail";
  EXPECT_FALSE(best_split(failing, cases_of({{8, 0.5}, {64, 0.5}})));
  EXPECT_FALSE(best_split(cases_of({{8, 0.5}}), cases_of({{8, 0.5}, {64, 0.5}})));  // different case sets
}

TEST(BestDtypeSplit, GivesEachDtypeToTheVariantThatWinsIt) {
  const std::vector<std::string> d{"f32", "bf16", "f32", "f16", "bf16"};
  const json a = with_dtypes(cases_of({{8, 0.9}, {8, 0.1}, {64, 0.7}, {8, 0.2}, {64, 0.3}}), d);
  const json b = with_dtypes(cases_of({{8, 0.5}, {8, 0.6}, {64, 0.5}, {8, 0.1}, {64, 0.2}}), d);
  const auto s = best_dtype_split(a, b);
  ASSERT_TRUE(s);
  // f32: a 1.6 against b 1.0; bf16: a 0.4 against 0.8; f16: a 0.2 against 0.1.
  EXPECT_EQ(s->a_dtypes, (std::vector<DType>{DType::f32, DType::f16}));
  EXPECT_EQ(s->a_cases, 3);
  EXPECT_DOUBLE_EQ(s->efficiency, (1.6 + 0.8 + 0.2) / 5);
  EXPECT_FALSE(best_dtype_split(a, a)) << "one variant winning every dtype is no split";
  EXPECT_FALSE(best_dtype_split(cases_of({{8, 0.9}, {8, 0.1}}), cases_of({{8, 0.1}, {8, 0.9}})))
      << "cases without a dtype";
}

TEST(Compose, RefusesMixedOperatorsAndNesting) {
  const CheckedContract c = softmax();
  Artifact a, b;
  a.op = "softmax", b.op = "rms_norm";
  EXPECT_THROW(compose_regimes(c, a, b, Route::by_io_bytes(100)), Error);
  b.op = "softmax", b.track = kRegimesTrack;
  EXPECT_THROW(compose_regimes(c, a, b, Route::by_io_bytes(100)), Error);
}

TEST(Compose, ASimdAndHalideCompositePassesTheGateInBothRegimes) {
  const CheckedContract c = softmax();
  const target::MachineInfo m = target::describe_machine();
  const Track* simd = find_track("simd");
  const Track* halide = find_track("halide");
  if (!halide) GTEST_SKIP() << "no halide track in this build";
  const int64_t below = 1 << 16;
  const Artifact comp = compose_regimes(c, simd->lower(c, m, Knobs::from_json({{"serial_below", "65536"}})),
                                        halide->lower(c, m, {}), Route::by_io_bytes(below));
  EXPECT_EQ(comp.track, kRegimesTrack);
  const RegimesParts parts = regimes_parts(comp.knobs);
  EXPECT_EQ(parts.small_track, "simd");
  EXPECT_EQ(parts.large_track, "halide");
  EXPECT_EQ(parts.small_knobs.at("serial_below"), "65536");
  EXPECT_EQ(parts.route.below_io_bytes, below);
  EXPECT_TRUE(parts.route.first_dtypes.empty());
  EXPECT_THROW(regimes_parts(Knobs{{"small", "not json"}}), Error);
  const build::BuildResult r = build::build(comp);
  ASSERT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  const build::Kernel k(r.library);
  int small = 0;
  for (const cases::Case& kc : cases::make_cases(c, cases::Set::Standard))
    small += cases::case_bytes(c, kc) < double(below);
  EXPECT_GT(small, 0);
  EXPECT_LT(small, c.contract.standard.count);
  for (const eval::CaseOutcome& o : eval::check_kernel(k, c, cases::Set::Standard))
    EXPECT_TRUE(o.pass) << o.str();
}

// A variant that refuses every call with CAKE_ERR_DEVICE: whichever regime it holds must fail, the other
// must pass, so the dispatch is seen to send each case where the threshold says.
Artifact refusing(const Artifact& like) {
  Artifact a;
  a.track = "refusing";
  a.op = like.op;
  a.contract_hash = like.contract_hash;
  a.main_file = "kernel.cpp";
  a.files.push_back(
      {"kernel.cpp",
       "extern \"C\" __attribute__((visibility(\"default\"))) int cake_run(const void*, int, void*, "
       "int, const double*, int) { return 7; }\n"});
  a.steps.push_back({{"g++", "-O1", "-fPIC", "-shared", "kernel.cpp", "-o", "kernel.so"}, "compile"});
  return a;
}

// Builds the composite and checks every standard case: it passes exactly where `good_runs` says the good
// variant (not the refusing one) takes it. Returns how many cases the good variant took.
int expect_routing(const CheckedContract& c, const Artifact& comp,
                   const std::function<bool(const cases::Case&)>& good_runs) {
  const build::BuildResult r = build::build(comp);
  EXPECT_TRUE(r.ok()) << r.failure << "\n" << r.log;
  if (!r.ok()) return 0;
  const build::Kernel k(r.library);
  const std::vector<cases::Case> ks = cases::make_cases(c, cases::Set::Standard);
  const std::vector<eval::CaseOutcome> out = eval::check_kernel(k, c, cases::Set::Standard);
  EXPECT_EQ(out.size(), ks.size());
  int good = 0;
  for (size_t i = 0; i < ks.size() && i < out.size(); ++i) {
    good += good_runs(ks[i]);
    EXPECT_EQ(out[i].pass, good_runs(ks[i])) << ks[i].describe() << ": " << out[i].str();
  }
  return good;
}

TEST(Compose, EachCaseRunsTheVariantOfItsRegime) {
  const CheckedContract c = softmax();
  const target::MachineInfo m = target::describe_machine();
  const Artifact good = find_track("simd")->lower(c, m, {});
  const Artifact bad = refusing(good);
  const int64_t below = 1 << 16;
  for (const bool good_small : {true, false}) {
    const Artifact comp = good_small ? compose_regimes(c, good, bad, Route::by_io_bytes(below))
                                     : compose_regimes(c, bad, good, Route::by_io_bytes(below));
    expect_routing(c, comp, [&](const cases::Case& k) {
      return (cases::case_bytes(c, k) < double(below)) == good_small;
    });
  }
}

TEST(Compose, EachCaseRunsTheVariantOfItsShape) {
  const CheckedContract c = softmax();                                 // x: [N, D]
  EXPECT_EQ(routable_sizes(c), (std::vector<std::string>{"D", "N"}));  // in the contract's size order
  const target::MachineInfo m = target::describe_machine();
  const Artifact good = find_track("simd")->lower(c, m, {});
  // The median D of the standard cases: both regimes hold some.
  std::vector<int64_t> ds;
  for (const cases::Case& k : cases::make_cases(c, cases::Set::Standard)) ds.push_back(k.free.at("D"));
  std::sort(ds.begin(), ds.end());
  const int64_t below = ds[ds.size() / 2];
  const Artifact comp = compose_regimes(c, refusing(good), good, Route::by_size("D", below));
  const RegimesParts parts = regimes_parts(comp.knobs);
  EXPECT_EQ(parts.route.size, "D");
  EXPECT_EQ(parts.route.below_size, below);
  const int large = expect_routing(c, comp, [&](const cases::Case& k) { return k.free.at("D") >= below; });
  EXPECT_GT(large, 0);
  EXPECT_LT(large, c.contract.standard.count);
  EXPECT_THROW(compose_regimes(c, good, good, Route::by_size("Q", 4)),
               Error);  // no tensor has a dimension Q
}

TEST(Compose, EachCaseRunsTheVariantOfItsDtype) {
  const CheckedContract c = softmax();
  const target::MachineInfo m = target::describe_machine();
  const Artifact good = find_track("simd")->lower(c, m, {});
  const Artifact comp = compose_regimes(c, good, refusing(good), Route::by_dtypes({DType::bf16, DType::f16}));
  const RegimesParts parts = regimes_parts(comp.knobs);
  EXPECT_EQ(parts.route.first_dtypes, (std::vector<DType>{DType::bf16, DType::f16}));
  EXPECT_THROW(
      regimes_parts(Knobs{{"small", "{}"}, {"large", "{}"}, {"below_io_bytes", "0"}, {"dtypes", "f99"}}),
      Error);
  const int lowp = expect_routing(c, comp, [](const cases::Case& k) { return k.dtype != DType::f32; });
  EXPECT_GT(lowp, 0);
  EXPECT_LT(lowp, c.contract.standard.count);
}

}  // namespace
}  // namespace cake::tracks
