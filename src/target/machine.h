// What this machine is (DESIGN §2 target/): CPU model, ISA flags, usable cores, cache sizes, measured
// peaks (STREAM-triad bandwidth, FP32 FMA throughput) cached per machine, and the admitted lanes.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cake::target {

// ISA extensions usable by this process (CPU flag and OS register-state support).
struct Isa {
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;  // cpuid leaf 7 subleaf 1 EAX bit 5
  bool avx512fp16 = false;
  bool amx = false;  // AMX-TILE with the OS tile state enabled

  // "avx512" (F+BW+VL+DQ), "avx2" (AVX2+FMA), "avx", "sse4.2" or "baseline".
  std::string level() const;
};

// Data-cache sizes in bytes (per instance, as sysconf reports them); 0 when the system does not say.
struct Caches {
  int64_t l1d_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t l3_bytes = 0;
  int64_t l3_sysfs_bytes = 0;  // /sys/devices/system/cpu/cpu0/cache, 0 when absent
  bool l3_reliable = true;     // false when sysconf's L3 is > 256 MiB or disagrees with /sys
  std::string l3_note;         // why l3 is unreliable; empty otherwise
};

// Measured peaks. Bandwidth: STREAM triad a[i] = b[i] + s*c[i] in f64, GB/s = 3*N*8 bytes / time (the
// STREAM convention: the write-allocate read of a[] is not counted, so bus traffic is 4/3 of it).
// FMA: FP32 fused multiply-add throughput in GFLOP/s, 2 flops per lane per FMA. Best of several repetitions.
struct Peaks {
  double bandwidth_gbs = 0;     // triad, all usable cores
  double bandwidth_gbs_1t = 0;  // triad, 1 thread
  double fma_gflops = 0;        // FP32 FMA, all usable cores
  double fma_gflops_1t = 0;     // FP32 FMA, 1 thread
  // BF16 dot product (VDPBF16PS: per f32 lane two bf16 products added, 4 flops), where the CPU has
  // AVX512-BF16; 0 where it has not. -1: not measured (a cache file from before this figure; re-measured).
  double bf16_dot_gflops = 0;
  double bf16_dot_gflops_1t = -1;
  // Triad over three arrays that stay in one core's L2 (cache_triad_bytes together), 1 thread: the
  // bandwidth a case whose data fits in cache is timed at (the harness repeats it on the same buffers).
  double cache_bandwidth_gbs_1t = 0;
  int64_t cache_triad_bytes = 0;
  // Triad over three arrays that fit the last-level cache together (llc_triad_bytes, about half of it),
  // on 1 thread and on all: the bandwidth of a case too big for L2 but not for the LLC. -1: not measured
  // (a cache file from before this tier; it is re-measured), 0: no believable LLC size.
  double llc_bandwidth_gbs = 0;
  double llc_bandwidth_gbs_1t = 0;
  int64_t llc_triad_bytes = -1;
  int threads = 0;  // thread count of the all-core figures
  std::string triad_dtype = "f64";
  int64_t triad_array_bytes = 0;  // bytes per array (three arrays)
  std::string fma_isa;            // "avx512", "avx2" or "scalar": the FMA loop that ran
  double seconds = 0;             // wall time the whole measurement took
  std::string measured_at;        // UTC, ISO 8601
};

// One execution lane (cpu, opencl, cuda, ascend). detail: the device when admitted, else the reason.
struct Lane {
  std::string name;
  bool admitted = false;
  std::string detail;
};

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"
  int logical_cores = 0;  // usable by this process (sched_getaffinity)
  Isa isa;
  Caches caches;
  Peaks peaks;
  // The roofline figures (copies of peaks.*): all-core bandwidth and FP32 FMA peak, and the 1-thread ones.
  double bandwidth_gbs = 0;
  double bandwidth_gbs_1t = 0;
  double fma_gflops = 0;
  double fma_gflops_1t = 0;
  double bf16_dot_gflops = 0;         // bf16 dot-product peak, all cores (0: no such instruction)
  double bf16_dot_gflops_1t = 0;      // the same, 1 thread
  double cache_bandwidth_gbs_1t = 0;  // L2-resident triad, 1 thread (private L2: all cores scale it)
  int64_t cache_triad_bytes = 0;      // the footprint it was measured at
  double llc_bandwidth_gbs = 0;       // LLC-resident triad, all cores (0: no LLC tier)
  double llc_bandwidth_gbs_1t = 0;    // LLC-resident triad, 1 thread
  int64_t llc_bytes = 0;              // the LLC size believed (0: unknown)
  bool peaks_cached = false;          // peaks came from the cache file rather than a fresh measurement
  std::string cache_file;             // where the peaks are cached
  std::vector<Lane> lanes;
};

using Progress = std::function<void(std::string_view)>;

// Detected now: model, cores, ISA, caches and lanes; peaks from cache_path("target/machine.json") when its
// key (CPU model + core count) matches, measured (and cached) otherwise or when refresh is set.
// progress, when given, is told what is being measured.
MachineInfo describe_machine(bool refresh = false, const Progress& progress = {});

Peaks measure_peaks(const Progress& progress = {});  // always measures
double measure_triad_gbs(int threads);               // f64 triad, best of several repetitions
double measure_fma_gflops(int threads);              // FP32 FMA, best of several repetitions
double measure_bf16_dot_gflops(int threads);         // VDPBF16PS, best of several; 0 without AVX512-BF16
double measure_cache_triad_gbs(int64_t footprint);   // 1-thread triad on 3 arrays of footprint / 3 bytes
int64_t believed_llc_bytes(const Caches& c);         // /sys's L3, else sysconf's when reliable, else 0

std::string cpu_model();
int logical_cores();
Isa detect_isa();
Caches detect_caches();
std::vector<Lane> detect_lanes();
std::string cache_key(const std::string& model, int cores);  // "model|cores"

nlohmann::json to_json(const Isa&);
nlohmann::json to_json(const Caches&);
nlohmann::json to_json(const Peaks&);
nlohmann::json to_json(const Lane&);
nlohmann::json to_json(const MachineInfo&);
Peaks peaks_from_json(const nlohmann::json&);          // throws cake::Error on a malformed document
MachineInfo machine_from_json(const nlohmann::json&);  // throws cake::Error on a malformed document
std::string to_text(const MachineInfo&);               // readable table for `cake doctor`

}  // namespace cake::target
