// Static facts about the host CPU: model name, usable logical cores, ISA extensions and cache sizes.
#include <cpuid.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "target/machine.h"

namespace cake::target {

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kL3Believable = 256 * kMiB;

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// XCR0: which register states the OS saves (bit 1 SSE, 2 AVX, 5-7 AVX-512, 17-18 AMX tiles).
uint64_t xcr0() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!(c & (1u << 27))) return 0;  // OSXSAVE
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

int64_t sysconf_bytes(int name) {
  const long v = sysconf(name);
  return v > 0 ? int64_t{v} : 0;
}

// "32768K" / "1M" / "512" → bytes; 0 when unparsable.
int64_t parse_size(const std::string& s) {
  std::istringstream in(s);
  int64_t v = 0;
  char unit = 0;
  if (!(in >> v)) return 0;
  in >> unit;
  if (unit == 'K' || unit == 'k') return v * 1024;
  if (unit == 'M' || unit == 'm') return v * kMiB;
  if (unit == 'G' || unit == 'g') return v * 1024 * kMiB;
  return v;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return trim(line);
}

// The largest level-3 cache /sys reports for cpu0, 0 when it reports none.
int64_t sysfs_l3_bytes() {
  int64_t best = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    const std::string level = read_line(dir + "/level");
    if (level.empty()) continue;
    if (level == "3") best = std::max(best, parse_size(read_line(dir + "/size")));
  }
  return best;
}

std::string mib(int64_t bytes) {
  std::ostringstream o;
  o << bytes / kMiB << " MiB";
  return o.str();
}

}  // namespace

std::string Isa::level() const {
  if (avx512f && avx512bw && avx512vl && avx512dq) return "avx512";
  if (avx2 && fma) return "avx2";
  if (avx) return "avx";
  if (sse42) return "sse4.2";
  return "baseline";
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  // No "model name" line (or no /proc): the cpuid brand string.
  unsigned regs[12] = {};
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000004u) {
    for (unsigned i = 0; i < 3; ++i)
      __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2], &regs[4 * i + 3]);
    std::string brand(reinterpret_cast<const char*>(regs), sizeof regs);
    brand = trim(brand.c_str());
    if (!brand.empty()) return brand;
  }
  return "unknown";
}

int logical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

Isa detect_isa() {
  __builtin_cpu_init();
  Isa isa;
  isa.sse42 = __builtin_cpu_supports("sse4.2");
  isa.avx = __builtin_cpu_supports("avx");
  isa.avx2 = __builtin_cpu_supports("avx2");
  isa.fma = __builtin_cpu_supports("fma");
  isa.avx512f = __builtin_cpu_supports("avx512f");
  isa.avx512bw = __builtin_cpu_supports("avx512bw");
  isa.avx512vl = __builtin_cpu_supports("avx512vl");
  isa.avx512dq = __builtin_cpu_supports("avx512dq");
  isa.avx512vnni = __builtin_cpu_supports("avx512vnni");
  isa.avx512fp16 = __builtin_cpu_supports("avx512fp16");

  const uint64_t x = xcr0();
  const bool zmm_state = (x & 0xE6) == 0xE6;       // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  const bool tile_state = (x & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    const bool amx_tile = d & (1u << 24);
    const unsigned max_sub = a;
    isa.amx = amx_tile && tile_state;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      isa.avx512bf16 = (a & (1u << 5)) && zmm_state && isa.avx512f;
    }
  }
  return isa;
}

Caches detect_caches() {
  Caches c;
  c.l1d_bytes = sysconf_bytes(_SC_LEVEL1_DCACHE_SIZE);
  c.l2_bytes = sysconf_bytes(_SC_LEVEL2_CACHE_SIZE);
  c.l3_bytes = sysconf_bytes(_SC_LEVEL3_CACHE_SIZE);
  c.l3_sysfs_bytes = sysfs_l3_bytes();
  if (c.l3_bytes > kL3Believable) {
    c.l3_reliable = false;
    c.l3_note = "sysconf reports " + mib(c.l3_bytes) + " (> 256 MiB, not believable)";
  } else if (c.l3_bytes > 0 && c.l3_sysfs_bytes > 0 && c.l3_sysfs_bytes != c.l3_bytes) {
    c.l3_reliable = false;
    c.l3_note = "sysconf reports " + mib(c.l3_bytes) + ", /sys reports " + mib(c.l3_sysfs_bytes);
  }
  if (c.l3_bytes > kL3Believable && c.l3_sysfs_bytes > 0)
    c.l3_note += "; /sys reports " + mib(c.l3_sysfs_bytes);
  return c;
}

}  // namespace cake::target
