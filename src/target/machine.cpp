// describe_machine: assembles MachineInfo, caching the measured peaks at cache_path("target/machine.json")
// keyed by CPU model and core count; JSON conversion and the readable `cake doctor` table.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/paths.h"
#include "target/machine.h"

namespace cake::target {

namespace {

constexpr int kCacheSchema = 2;  // bump when Peaks or the way they are measured changes
constexpr const char* kCacheFile = "target/machine.json";

using json = nlohmann::json;

template <typename T>
T field(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) throw Error(std::string("target: JSON lacks \"") + key + "\"");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw Error(std::string("target: JSON field \"") + key + "\": " + e.what());
  }
}

template <typename T>
T field_or(const json& j, const char* key, T fallback) {
  return j.is_object() && j.contains(key) ? field<T>(j, key) : fallback;
}

std::string human_bytes(int64_t b) {
  if (b <= 0) return "unknown";
  char buf[32];
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0)
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(b >> 20));
  else if (b >= 1024 && b % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%lld KiB", static_cast<long long>(b >> 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

std::string num(double v, int decimals = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

bool usable(const Peaks& p) {
  return p.bandwidth_gbs > 0 && p.bandwidth_gbs_1t > 0 && p.fma_gflops > 0 && p.fma_gflops_1t > 0 &&
         p.cache_bandwidth_gbs_1t > 0 && p.llc_triad_bytes >= 0 && p.bf16_dot_gflops_1t >= 0 &&
         (p.llc_triad_bytes == 0 || (p.llc_bandwidth_gbs > 0 && p.llc_bandwidth_gbs_1t > 0));
}

void set_peaks(MachineInfo& m, const Peaks& p) {
  m.peaks = p;
  m.bandwidth_gbs = p.bandwidth_gbs;
  m.bandwidth_gbs_1t = p.bandwidth_gbs_1t;
  m.fma_gflops = p.fma_gflops;
  m.fma_gflops_1t = p.fma_gflops_1t;
  m.bf16_dot_gflops = std::max(0.0, p.bf16_dot_gflops);
  m.bf16_dot_gflops_1t = std::max(0.0, p.bf16_dot_gflops_1t);
  m.cache_bandwidth_gbs_1t = p.cache_bandwidth_gbs_1t;
  m.cache_triad_bytes = p.cache_triad_bytes;
  m.llc_bandwidth_gbs = p.llc_bandwidth_gbs;  // 0 when the LLC tier was not measured
  m.llc_bandwidth_gbs_1t = p.llc_bandwidth_gbs_1t;
  m.llc_bytes = believed_llc_bytes(m.caches);
}

}  // namespace

std::string cache_key(const std::string& model, int cores) {
  return model + "|" + std::to_string(cores);
}

namespace {
// The ISA flags by name, in the order the doctor prints them.
std::vector<std::pair<const char*, bool>> isa_flags(const Isa& i) {
  return {{"sse4.2", i.sse42},
          {"avx", i.avx},
          {"avx2", i.avx2},
          {"fma", i.fma},
          {"avx512f", i.avx512f},
          {"avx512bw", i.avx512bw},
          {"avx512vl", i.avx512vl},
          {"avx512dq", i.avx512dq},
          {"avx512vnni", i.avx512vnni},
          {"avx512bf16", i.avx512bf16},
          {"avx512fp16", i.avx512fp16},
          {"amx", i.amx}};
}
}  // namespace

json to_json(const Isa& i) {
  json j{{"level", i.level()}};
  for (const auto& [name, on] : isa_flags(i)) j[name] = on;
  return j;
}

json to_json(const Caches& c) {
  return json{{"l1d_bytes", c.l1d_bytes},           {"l2_bytes", c.l2_bytes},       {"l3_bytes", c.l3_bytes},
              {"l3_sysfs_bytes", c.l3_sysfs_bytes}, {"l3_reliable", c.l3_reliable}, {"l3_note", c.l3_note}};
}

json to_json(const Peaks& p) {
  return json{{"bandwidth_gbs", p.bandwidth_gbs},
              {"bandwidth_gbs_1t", p.bandwidth_gbs_1t},
              {"fma_gflops", p.fma_gflops},
              {"fma_gflops_1t", p.fma_gflops_1t},
              {"bf16_dot_gflops", p.bf16_dot_gflops},
              {"bf16_dot_gflops_1t", p.bf16_dot_gflops_1t},
              {"cache_bandwidth_gbs_1t", p.cache_bandwidth_gbs_1t},
              {"cache_triad_bytes", p.cache_triad_bytes},
              {"llc_bandwidth_gbs", p.llc_bandwidth_gbs},
              {"llc_bandwidth_gbs_1t", p.llc_bandwidth_gbs_1t},
              {"llc_triad_bytes", p.llc_triad_bytes},
              {"threads", p.threads},
              {"triad_dtype", p.triad_dtype},
              {"triad_array_bytes", p.triad_array_bytes},
              {"bandwidth_convention", "STREAM: 3 arrays x N x sizeof per sweep, write-allocate not counted"},
              {"fma_isa", p.fma_isa},
              {"seconds", p.seconds},
              {"measured_at", p.measured_at}};
}

json to_json(const Lane& l) {
  return json{{"name", l.name}, {"admitted", l.admitted}, {"detail", l.detail}};
}

json to_json(const MachineInfo& m) {
  json lanes = json::array();
  for (const Lane& l : m.lanes) lanes.push_back(to_json(l));
  return json{{"cpu_model", m.cpu_model},
              {"logical_cores", m.logical_cores},
              {"isa", to_json(m.isa)},
              {"caches", to_json(m.caches)},
              {"bandwidth_gbs", m.bandwidth_gbs},
              {"bandwidth_gbs_1t", m.bandwidth_gbs_1t},
              {"fma_gflops", m.fma_gflops},
              {"fma_gflops_1t", m.fma_gflops_1t},
              {"bf16_dot_gflops", m.bf16_dot_gflops},
              {"bf16_dot_gflops_1t", m.bf16_dot_gflops_1t},
              {"cache_bandwidth_gbs_1t", m.cache_bandwidth_gbs_1t},
              {"llc_bandwidth_gbs", m.llc_bandwidth_gbs},
              {"llc_bandwidth_gbs_1t", m.llc_bandwidth_gbs_1t},
              {"llc_bytes", m.llc_bytes},
              {"peaks", to_json(m.peaks)},
              {"peaks_cached", m.peaks_cached},
              {"cache_file", m.cache_file},
              {"lanes", lanes}};
}

Peaks peaks_from_json(const json& j) {
  Peaks p;
  p.bandwidth_gbs = field<double>(j, "bandwidth_gbs");
  p.bandwidth_gbs_1t = field<double>(j, "bandwidth_gbs_1t");
  p.fma_gflops = field<double>(j, "fma_gflops");
  p.fma_gflops_1t = field<double>(j, "fma_gflops_1t");
  p.bf16_dot_gflops = field_or<double>(j, "bf16_dot_gflops", 0.0);
  p.bf16_dot_gflops_1t = field_or<double>(j, "bf16_dot_gflops_1t", -1.0);
  p.cache_bandwidth_gbs_1t = field_or<double>(j, "cache_bandwidth_gbs_1t", 0.0);
  p.cache_triad_bytes = field_or<int64_t>(j, "cache_triad_bytes", 0);
  p.llc_bandwidth_gbs = field_or<double>(j, "llc_bandwidth_gbs", 0.0);
  p.llc_bandwidth_gbs_1t = field_or<double>(j, "llc_bandwidth_gbs_1t", 0.0);
  p.llc_triad_bytes = field_or<int64_t>(j, "llc_triad_bytes", -1);
  p.threads = field<int>(j, "threads");
  p.triad_dtype = field_or<std::string>(j, "triad_dtype", "f64");
  p.triad_array_bytes = field_or<int64_t>(j, "triad_array_bytes", 0);
  p.fma_isa = field_or<std::string>(j, "fma_isa", "");
  p.seconds = field_or<double>(j, "seconds", 0.0);
  p.measured_at = field_or<std::string>(j, "measured_at", "");
  return p;
}

MachineInfo machine_from_json(const json& j) {
  MachineInfo m;
  m.cpu_model = field<std::string>(j, "cpu_model");
  m.logical_cores = field<int>(j, "logical_cores");
  const json isa = field<json>(j, "isa");
  m.isa.sse42 = field<bool>(isa, "sse4.2");
  m.isa.avx = field<bool>(isa, "avx");
  m.isa.avx2 = field<bool>(isa, "avx2");
  m.isa.fma = field<bool>(isa, "fma");
  m.isa.avx512f = field<bool>(isa, "avx512f");
  m.isa.avx512bw = field<bool>(isa, "avx512bw");
  m.isa.avx512vl = field<bool>(isa, "avx512vl");
  m.isa.avx512dq = field<bool>(isa, "avx512dq");
  m.isa.avx512vnni = field<bool>(isa, "avx512vnni");
  m.isa.avx512bf16 = field<bool>(isa, "avx512bf16");
  m.isa.avx512fp16 = field<bool>(isa, "avx512fp16");
  m.isa.amx = field<bool>(isa, "amx");
  const json caches = field<json>(j, "caches");
  m.caches.l1d_bytes = field<int64_t>(caches, "l1d_bytes");
  m.caches.l2_bytes = field<int64_t>(caches, "l2_bytes");
  m.caches.l3_bytes = field<int64_t>(caches, "l3_bytes");
  m.caches.l3_sysfs_bytes = field_or<int64_t>(caches, "l3_sysfs_bytes", 0);
  m.caches.l3_reliable = field<bool>(caches, "l3_reliable");
  m.caches.l3_note = field_or<std::string>(caches, "l3_note", "");
  set_peaks(m, peaks_from_json(field<json>(j, "peaks")));
  m.peaks_cached = field_or<bool>(j, "peaks_cached", false);
  m.cache_file = field_or<std::string>(j, "cache_file", "");
  for (const json& l : field<json>(j, "lanes")) {
    m.lanes.push_back(
        Lane{field<std::string>(l, "name"), field<bool>(l, "admitted"), field<std::string>(l, "detail")});
  }
  return m;
}

MachineInfo describe_machine(bool refresh, const Progress& progress) {
  MachineInfo m;
  m.cpu_model = cpu_model();
  m.logical_cores = logical_cores();
  m.isa = detect_isa();
  m.caches = detect_caches();
  const std::string key = cache_key(m.cpu_model, m.logical_cores);
  const auto path = cache_path(kCacheFile);
  m.cache_file = path.string();

  bool have = false;
  if (!refresh) {
    if (auto text = read_file(path)) {
      try {
        const json j = json::parse(*text);
        if (field<int>(j, "schema") == kCacheSchema && field<std::string>(j, "key") == key) {
          const Peaks p = peaks_from_json(field<json>(j, "peaks"));
          if (usable(p)) {
            set_peaks(m, p);
            have = true;
          }
        }
      } catch (const std::exception&) {
        // A corrupt or foreign cache file is re-measured and overwritten.
      }
    }
  }
  if (!have) {
    set_peaks(m, measure_peaks(progress));
    const json doc{{"schema", kCacheSchema},
                   {"key", key},
                   {"cpu_model", m.cpu_model},
                   {"logical_cores", m.logical_cores},
                   {"peaks", to_json(m.peaks)}};
    write_file_atomic(path, doc.dump(2) + "\n");
  }
  m.peaks_cached = have;
  m.lanes = detect_lanes();
  return m;
}

std::string to_text(const MachineInfo& m) {
  std::ostringstream o;
  const Isa& i = m.isa;
  const auto flags = isa_flags(i);
  std::string have, lack;
  for (const auto& [name, on] : flags) {
    std::string& s = on ? have : lack;
    if (!s.empty()) s += ' ';
    s += name;
  }

  o << "Machine\n";
  o << "  CPU        " << m.cpu_model << "\n";
  o << "  cores      " << m.logical_cores << " usable\n";
  o << "  ISA        " << i.level() << "  (" << (have.empty() ? "none" : have) << ")\n";
  if (!lack.empty()) o << "  absent     " << lack << "\n";
  o << "  caches     L1d " << human_bytes(m.caches.l1d_bytes) << ", L2 " << human_bytes(m.caches.l2_bytes)
    << ", L3 " << human_bytes(m.caches.l3_bytes);
  if (!m.caches.l3_reliable) o << " (unreliable: " << m.caches.l3_note << ")";
  o << "\n\n";

  const Peaks& p = m.peaks;
  o << "Measured peaks  (" << (m.peaks_cached ? "cached" : "measured now") << ", " << p.measured_at << "; "
    << num(p.seconds, 2) << " s to measure)\n";
  const std::string all = std::to_string(p.threads) + " threads";
  o << "  " << pad("", 34) << pad("1 thread", 12) << all << "\n";
  o << "  " << pad("memory bandwidth, triad f64 GB/s", 34) << pad(num(p.bandwidth_gbs_1t), 12)
    << num(p.bandwidth_gbs) << "\n";
  o << "  " << pad("FP32 FMA peak (" + p.fma_isa + ") GFLOP/s", 34) << pad(num(p.fma_gflops_1t), 12)
    << num(p.fma_gflops) << "\n";
  if (p.bf16_dot_gflops_1t > 0) {
    o << "  " << pad("BF16 dot peak (vdpbf16ps) GFLOP/s", 34) << pad(num(p.bf16_dot_gflops_1t), 12)
      << num(p.bf16_dot_gflops) << "\n";
  }
  o << "  " << pad("cache-resident triad GB/s", 34) << pad(num(p.cache_bandwidth_gbs_1t), 12)
    << num(p.cache_bandwidth_gbs_1t * p.threads) << " (per-core L2, scaled)\n";
  if (p.llc_triad_bytes > 0) {
    o << "  " << pad("LLC-resident triad GB/s", 34) << pad(num(p.llc_bandwidth_gbs_1t), 12)
      << num(p.llc_bandwidth_gbs) << " (" << (p.llc_triad_bytes >> 20) << " MiB in all, LLC "
      << human_bytes(m.llc_bytes) << ")\n";
  }
  o << "  triad: a[i] = b[i] + s*c[i], 3 x " << (p.triad_array_bytes >> 20)
    << " MiB arrays (cache-resident: " << (p.cache_triad_bytes >> 10)
    << " KiB in all), GB/s = 3*N*8 B / time (STREAM; write-allocate not counted)\n";
  o << "  cache: " << m.cache_file << "  (cake doctor --refresh re-measures)\n\n";

  o << "Lanes\n";
  for (const Lane& l : m.lanes)
    o << "  " << pad(l.name, 8) << pad(l.admitted ? "yes" : "no", 5) << l.detail << "\n";
  return o.str();
}

}  // namespace cake::target
