// Tests of the static machine facts (ISA against the compiler's and cpuid's view, cores, caches), the
// lanes, the JSON round trip and the peaks cache (key match, key mismatch, corrupt file, refresh).
#include <cpuid.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/error.h"
#include "target/machine.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace cake::target;

namespace {

uint64_t test_xcr0() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

}  // namespace

TEST(Isa, MatchesBuiltinCpuSupports) {
  __builtin_cpu_init();
  const Isa isa = detect_isa();
  EXPECT_EQ(isa.sse42, bool(__builtin_cpu_supports("sse4.2")));
  EXPECT_EQ(isa.avx, bool(__builtin_cpu_supports("avx")));
  EXPECT_EQ(isa.avx2, bool(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(isa.fma, bool(__builtin_cpu_supports("fma")));
  EXPECT_EQ(isa.avx512f, bool(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(isa.avx512bw, bool(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(isa.avx512vl, bool(__builtin_cpu_supports("avx512vl")));
  EXPECT_EQ(isa.avx512dq, bool(__builtin_cpu_supports("avx512dq")));
  EXPECT_EQ(isa.avx512vnni, bool(__builtin_cpu_supports("avx512vnni")));
  EXPECT_EQ(isa.avx512fp16, bool(__builtin_cpu_supports("avx512fp16")));
}

TEST(Isa, Bf16AndAmxMatchCpuid) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool bf16 = false, amx = false;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    amx = (d >> 24) & 1;
    if (a >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      bf16 = (a >> 5) & 1;
    }
  }
  const uint64_t x = test_xcr0();
  bf16 = bf16 && __builtin_cpu_supports("avx512f") && (x & 0xE6) == 0xE6;
  amx = amx && (x & 0x60000) == 0x60000;
  const Isa isa = detect_isa();
  EXPECT_EQ(isa.avx512bf16, bf16);
  EXPECT_EQ(isa.amx, amx);
}

TEST(Isa, LevelFollowsFlags) {
  const Isa isa = detect_isa();
  const std::string level = isa.level();
  if (isa.avx512f && isa.avx512bw && isa.avx512vl && isa.avx512dq) {
    EXPECT_EQ(level, "avx512");
  } else if (isa.avx2 && isa.fma) {
    EXPECT_EQ(level, "avx2");
  }
  Isa none;
  EXPECT_EQ(none.level(), "baseline");
}

TEST(Machine, ModelAndCores) {
  EXPECT_FALSE(cpu_model().empty());
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(logical_cores(), CPU_COUNT(&set));
  EXPECT_EQ(cache_key("X", 4), "X|4");
}

TEST(Machine, CachesAsSysconfSaysWithL3Flag) {
  const Caches c = detect_caches();
  const auto sc = [](int name) { return std::max<long>(0, sysconf(name)); };
  EXPECT_EQ(c.l1d_bytes, sc(_SC_LEVEL1_DCACHE_SIZE));
  EXPECT_EQ(c.l2_bytes, sc(_SC_LEVEL2_CACHE_SIZE));
  EXPECT_EQ(c.l3_bytes, sc(_SC_LEVEL3_CACHE_SIZE));
  if (c.l3_bytes > (int64_t{256} << 20)) {
    EXPECT_FALSE(c.l3_reliable);
  }
  EXPECT_EQ(c.l3_reliable, c.l3_note.empty());
}

TEST(Lanes, CpuAdmittedAndEveryRefusalHasAReason) {
  const auto lanes = detect_lanes();
  ASSERT_GE(lanes.size(), 4u);
  EXPECT_EQ(lanes[0].name, "cpu");
  EXPECT_TRUE(lanes[0].admitted);
  EXPECT_EQ(lanes[0].detail, detect_isa().level());
  std::set<std::string> names;
  for (const Lane& l : lanes) {
    names.insert(l.name);
    EXPECT_FALSE(l.detail.empty()) << l.name;
    std::printf("lane %-7s %-3s %s\n", l.name.c_str(), l.admitted ? "yes" : "no", l.detail.c_str());
  }
  EXPECT_EQ(names, (std::set<std::string>{"cpu", "opencl", "cuda", "ascend"}));
}

TEST(Lanes, AscendFollowsEnvironment) {
  const char* old = std::getenv("ASCEND_HOME_PATH");
  const std::string saved = old ? old : "";
  const auto ascend = [] {
    for (const Lane& l : detect_lanes())
      if (l.name == "ascend") return l;
    return Lane{};
  };
  setenv("ASCEND_HOME_PATH", "/nonexistent/cann", 1);
  Lane l = ascend();
  EXPECT_FALSE(l.admitted);
  EXPECT_NE(l.detail.find("not a directory"), std::string::npos) << l.detail;
  setenv("ASCEND_HOME_PATH", fs::temp_directory_path().c_str(), 1);
  l = ascend();
  EXPECT_TRUE(l.admitted);
  unsetenv("ASCEND_HOME_PATH");
  l = ascend();
  EXPECT_FALSE(l.admitted);
  EXPECT_NE(l.detail.find("not set"), std::string::npos);
  if (old) setenv("ASCEND_HOME_PATH", saved.c_str(), 1);
}

TEST(Json, RoundTripKeepsEveryField) {
  MachineInfo m;
  m.cpu_model = cpu_model();
  m.logical_cores = logical_cores();
  m.isa = detect_isa();
  m.caches = detect_caches();
  m.llc_bytes = believed_llc_bytes(m.caches);  // derived from caches, as describe_machine sets it
  m.peaks.bandwidth_gbs = 41.5;
  m.peaks.bandwidth_gbs_1t = 22.25;
  m.peaks.fma_gflops = 400.5;
  m.peaks.fma_gflops_1t = 205.0;
  m.peaks.bf16_dot_gflops = 801.0;
  m.peaks.bf16_dot_gflops_1t = 410.0;
  m.peaks.threads = m.logical_cores;
  m.peaks.triad_array_bytes = int64_t{64} << 20;
  m.peaks.fma_isa = "avx512";
  m.peaks.seconds = 0.9;
  m.peaks.measured_at = "2024-01-01T00:00:00Z";
  m.bandwidth_gbs = m.peaks.bandwidth_gbs;
  m.bandwidth_gbs_1t = m.peaks.bandwidth_gbs_1t;
  m.fma_gflops = m.peaks.fma_gflops;
  m.fma_gflops_1t = m.peaks.fma_gflops_1t;
  m.bf16_dot_gflops = m.peaks.bf16_dot_gflops;
  m.bf16_dot_gflops_1t = m.peaks.bf16_dot_gflops_1t;
  m.peaks_cached = true;
  m.cache_file = "/tmp/x.json";
  m.lanes = detect_lanes();

  const json j = to_json(m);
  for (const char* key : {"cpu_model", "logical_cores", "isa", "caches", "bandwidth_gbs", "bandwidth_gbs_1t",
                          "fma_gflops", "fma_gflops_1t", "peaks", "peaks_cached", "cache_file", "lanes"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* key : {"level", "sse4.2", "avx2", "fma", "avx512f", "avx512bf16", "avx512fp16", "amx"})
    EXPECT_TRUE(j["isa"].contains(key)) << key;
  EXPECT_EQ(j["peaks"]["triad_dtype"], "f64");

  const MachineInfo r = machine_from_json(json::parse(j.dump()));
  EXPECT_EQ(to_json(r), j);
  EXPECT_EQ(r.cpu_model, m.cpu_model);
  EXPECT_EQ(r.bandwidth_gbs, 41.5);
  EXPECT_EQ(r.fma_gflops_1t, 205.0);
  EXPECT_EQ(r.bf16_dot_gflops_1t, 410.0);
  EXPECT_EQ(r.peaks.bf16_dot_gflops, 801.0);
  EXPECT_EQ(r.peaks.fma_isa, "avx512");
  ASSERT_EQ(r.lanes.size(), m.lanes.size());
  EXPECT_EQ(r.lanes[0].detail, m.lanes[0].detail);
  EXPECT_EQ(r.isa.avx2, m.isa.avx2);
  EXPECT_EQ(r.caches.l3_bytes, m.caches.l3_bytes);

  json broken = j;
  broken.erase("isa");
  EXPECT_THROW(machine_from_json(broken), cake::Error);
  EXPECT_THROW(peaks_from_json(json{{"bandwidth_gbs", "fast"}}), cake::Error);

  const std::string text = to_text(m);
  EXPECT_NE(text.find(m.cpu_model), std::string::npos);
  EXPECT_NE(text.find("41.5"), std::string::npos);
  EXPECT_NE(text.find("opencl"), std::string::npos);
  EXPECT_NE(text.find("BF16 dot peak"), std::string::npos);
}

// Each test gets its own cache directory through $CAKE_CACHE_DIR.
class PeaksCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cake-target-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    if (const char* old = std::getenv("CAKE_CACHE_DIR")) old_ = old, had_old_ = true;
    setenv("CAKE_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (had_old_)
      setenv("CAKE_CACHE_DIR", old_.c_str(), 1);
    else
      unsetenv("CAKE_CACHE_DIR");
    fs::remove_all(dir_);
  }
  fs::path file() const { return dir_ / "target" / "machine.json"; }
  json read() const {
    std::ifstream f(file());
    return json::parse(f);
  }
  void write(const json& j) const { std::ofstream(file()) << j.dump(); }
  void write_text(const std::string& s) const { std::ofstream(file()) << s; }

  fs::path dir_;
  std::string old_;
  bool had_old_ = false;
};

TEST_F(PeaksCache, MeasuresOnceThenReusesByKey) {
  const MachineInfo first = describe_machine();
  EXPECT_FALSE(first.peaks_cached);
  EXPECT_EQ(first.cache_file, file().string());
  ASSERT_TRUE(fs::exists(file()));
  EXPECT_GT(first.bandwidth_gbs, 0);
  EXPECT_GT(first.fma_gflops, 0);
  EXPECT_EQ(first.bandwidth_gbs, first.peaks.bandwidth_gbs);
  EXPECT_EQ(first.fma_gflops_1t, first.peaks.fma_gflops_1t);
  EXPECT_LT(first.peaks.seconds, 3.0) << "the whole measurement should take well under ~1.5 s";
  std::printf("peaks measured in %.2f s: triad %.1f / %.1f GB/s, FMA %.1f / %.1f GFLOP/s (1 / %d threads)\n",
              first.peaks.seconds, first.bandwidth_gbs_1t, first.bandwidth_gbs, first.fma_gflops_1t,
              first.fma_gflops, first.peaks.threads);

  json doc = read();
  EXPECT_EQ(doc["key"], cache_key(cpu_model(), logical_cores()));

  const MachineInfo second = describe_machine();
  EXPECT_TRUE(second.peaks_cached);
  EXPECT_EQ(second.bandwidth_gbs, first.bandwidth_gbs);
  EXPECT_EQ(second.fma_gflops, first.fma_gflops);

  // The numbers really come from the file.
  doc["peaks"]["bandwidth_gbs"] = 12345.0;
  write(doc);
  const MachineInfo third = describe_machine();
  EXPECT_TRUE(third.peaks_cached);
  EXPECT_EQ(third.bandwidth_gbs, 12345.0);
}

TEST_F(PeaksCache, MeasuresTheBf16DotProductWhereTheCpuHasIt) {
  const MachineInfo m = describe_machine();
  if (!m.isa.avx512bf16) {
    EXPECT_EQ(m.bf16_dot_gflops_1t, 0);
    return;
  }
  // Two bf16 products per f32 lane: twice the f32 FMA's multiply-adds per instruction (measured here: 2.0x
  // on one port-pair core), and no core issues it at under half the FMA's rate.
  EXPECT_GT(m.bf16_dot_gflops_1t, 0.5 * m.fma_gflops_1t);
  EXPECT_GT(m.bf16_dot_gflops, 0);
  // A cache file from before this figure has none: the peaks are measured again.
  json doc = read();
  doc["peaks"].erase("bf16_dot_gflops_1t");
  write(doc);
  EXPECT_FALSE(describe_machine().peaks_cached);
  EXPECT_GT(read()["peaks"]["bf16_dot_gflops_1t"].get<double>(), 0);
}

TEST_F(PeaksCache, RemeasuresWhenKeyDiffers) {
  describe_machine();
  json doc = read();
  doc["key"] = "Some Other CPU|128";
  doc["peaks"]["bandwidth_gbs"] = 12345.0;
  write(doc);
  const MachineInfo m = describe_machine();
  EXPECT_FALSE(m.peaks_cached);
  EXPECT_NE(m.bandwidth_gbs, 12345.0);
  EXPECT_EQ(read()["key"], cache_key(cpu_model(), logical_cores()));
}

TEST_F(PeaksCache, RemeasuresWhenCorruptOrRefreshed) {
  fs::create_directories(file().parent_path());
  write_text("{ not json");
  const MachineInfo m = describe_machine();
  EXPECT_FALSE(m.peaks_cached);
  json doc = read();
  doc["peaks"]["bandwidth_gbs"] = 12345.0;
  write(doc);
  const MachineInfo r = describe_machine(/*refresh=*/true);
  EXPECT_FALSE(r.peaks_cached);
  EXPECT_NE(r.bandwidth_gbs, 12345.0);
  EXPECT_NE(read()["peaks"]["bandwidth_gbs"], 12345.0);
}
