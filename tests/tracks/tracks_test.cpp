// The track interface: the registry, knob spaces (defaults, validation with actionable errors, JSON),
// and the shared ABI prologue's checks, exercised through a simd kernel.
#include <gtest/gtest.h>

#include <set>

#include "build/build_service.h"
#include "build/kernel.h"
#include "contract/contract.h"
#include "core/error.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::tracks {
namespace {

TEST(Registry, NamesAreUniqueAndFindable) {
  std::set<std::string> names;
  for (const Track* t : all_tracks()) {
    EXPECT_TRUE(names.insert(std::string(t->name())).second) << t->name();
    EXPECT_EQ(find_track(t->name()), t);
  }
  EXPECT_TRUE(names.count("simd"));
  EXPECT_EQ(find_track("no-such-track"), nullptr);
}

TEST(Knobs, ResolveFillsDefaultsAndRejectsValuesOutsideTheSpace) {
  KnobSpace s;
  s.add_int("tile", {8, 16, 32}, 16, "tile size")
      .add_bool("fast", false, "fast math")
      .add_choice("mode", {"a", "b"}, "a", "mode");
  const Knobs d = s.resolve({});
  EXPECT_EQ(d.integer("tile"), 16);
  EXPECT_FALSE(d.boolean("fast"));
  EXPECT_EQ(d.choice("mode"), "a");
  EXPECT_EQ(s.resolve({{"tile", "32"}}).integer("tile"), 32);
  try {
    s.resolve({{"tile", "12"}});
    FAIL() << "12 is outside {8, 16, 32}";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: 8, 16, 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.resolve({{"tilee", "8"}}), Error);
  EXPECT_THROW(s.resolve({{"fast", "yes"}}), Error);
  EXPECT_THROW(s.resolve({{"mode", "c"}}), Error);
  EXPECT_EQ(Knobs::from_json(d.to_json()), d);
  EXPECT_EQ(d.str(), "fast=false mode=a tile=16");
  EXPECT_EQ(s.to_json().size(), 3u);
}

TEST(Knobs, EveryTrackDefaultsAreInsideItsSpace) {
  const target::MachineInfo m = target::describe_machine();
  const CheckedContract c = load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/softmax.yaml");
  for (const Track* t : all_tracks()) {
    const KnobSpace s = t->knobs(c, m);
    EXPECT_FALSE(s.specs().empty()) << t->name();
    EXPECT_NO_THROW(s.resolve(s.defaults())) << t->name();
    for (const KnobSpec& k : s.specs()) EXPECT_FALSE(k.help.empty()) << t->name() << "." << k.name;
    EXPECT_THROW(t->lower(c, m, {{"no_such_knob", "1"}}), Error) << t->name();
  }
}

// The prologue every kernel shares rejects calls that disagree with the contract.
TEST(AbiPrologue, RejectsWrongCountsShapesDtypesAndLayouts) {
  const target::MachineInfo m = target::describe_machine();
  const CheckedContract c = load_and_check(std::string(CAKE_SOURCE_DIR) + "/bench/ops/rms_norm.yaml");
  const build::BuildResult r = build::build(find_track("simd")->lower(c, m, {}));
  ASSERT_TRUE(r.ok()) << r.failure;
  const build::Kernel k(r.library);
  auto tensors = [](DType a, DType b, Shape sa, Shape sb) {
    std::vector<Tensor> v;
    v.emplace_back(a, sa);
    if (!sb.empty()) v.emplace_back(b, sb);
    return v;
  };
  std::vector<Tensor> in = tensors(DType::f32, DType::f32, {4, 8}, {8});
  std::vector<Tensor> out = tensors(DType::f32, DType::f32, {4, 8}, {});
  const std::vector<double> p{1e-6, 8, 4};  // eps, then the free sizes D, N
  EXPECT_EQ(k.run(in, out, p), CAKE_OK);
  EXPECT_EQ(k.run(in, out, {1e-6, 8}), CAKE_ERR_ARGS);
  EXPECT_EQ(k.run(in, out, {1e-6, 8, 5}), CAKE_ERR_SHAPE);
  std::vector<Tensor> in16 = tensors(DType::f16, DType::f16, {4, 8}, {8});
  std::vector<Tensor> out16 = tensors(DType::f16, DType::f16, {4, 8}, {});
  EXPECT_EQ(k.run(in16, out16, p), CAKE_ERR_DTYPE) << "rms_norm lists f32 and bf16 only";
  std::vector<Tensor> mixed = tensors(DType::f32, DType::bf16, {4, 8}, {8});
  EXPECT_EQ(k.run(mixed, out, p), CAKE_ERR_DTYPE);
  std::vector<cake_tensor> ti{in[0].abi(), in[1].abi()}, to{out[0].abi()};
  ti[0].stride[0] = 16;  // rows 16 apart: not dense
  EXPECT_EQ(k.fn()(ti.data(), 2, to.data(), 1, p.data(), 3), CAKE_ERR_LAYOUT);
}

}  // namespace
}  // namespace cake::tracks
