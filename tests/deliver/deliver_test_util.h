// Shared helpers of the deliver tests: temporary folders, running tools (cmake, cc) with a time limit,
// building the simd kernel of a bench operator, a stand-in kernel, a synthetic report, and the tensor file
// format the consumer programs read and write.
#pragma once

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "build/build_service.h"
#include "build/process.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "core/error.h"
#include "core/paths.h"
#include "core/tensor.h"
#include "deliver/package.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::deliver_test {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed when the process exits (kept when CAKE_KEEP_TEST_DIR
// is set, for debugging).
inline const fs::path& temp_root() {
  struct Root {
    fs::path p;
    Root() {
      std::string t = (fs::temp_directory_path() / "cake-deliver-XXXXXX").string();
      if (!mkdtemp(t.data())) throw Error("mkdtemp failed");
      p = t;
    }
    ~Root() {
      std::error_code ec;
      if (!std::getenv("CAKE_KEEP_TEST_DIR")) fs::remove_all(p, ec);
    }
  };
  static const Root r;
  return r.p;
}

struct Cmd {
  int rc = -1;
  std::string out;
  bool ok() const { return rc == 0; }
};

inline std::string argv_str(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs argv in dir; rc is the exit code (or 128 + signal, or -1 when it did not start / timed out).
inline Cmd run(const std::vector<std::string>& argv, const fs::path& dir, double timeout_s = 300) {
  static int n = 0;
  const fs::path log = temp_root() / ("cmd-" + std::to_string(++n) + ".log");
  const build::ProcessResult r = build::run_process(argv, dir, log, timeout_s);
  Cmd c;
  c.out = read_file(log).value_or("");
  if (!r.started)
    c.out = "could not start " + argv_str(argv) + "\n" + c.out;
  else if (r.timed_out)
    c.out = "timed out: " + argv_str(argv) + "\n" + c.out;
  else if (r.signal)
    c.rc = 128 + r.signal;
  else
    c.rc = r.exit_code;
  return c;
}

inline CheckedContract bench_contract(const std::string& op) {
  return load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml")).string());
}

inline const target::MachineInfo& machine() {
  static const target::MachineInfo m = target::describe_machine();
  return m;
}

// The simd track's default-knob kernel of a bench operator (the build service caches it across runs).
inline fs::path simd_kernel(const CheckedContract& c) {
  const tracks::Track* t = tracks::find_track("simd");
  if (!t) throw Error("the simd track is not registered");
  const tracks::Feasibility f = t->feasible(c, machine());
  if (!f.ok) throw Error("simd cannot lower " + c.contract.name + ": " + f.reason);
  const build::BuildResult r = build::build(t->lower(c, machine(), {}));
  if (!r.ok())
    throw Error("building the simd kernel of " + c.contract.name + " failed: " + r.failure + "\n" + r.log);
  return r.library;
}

// A stand-in kernel: exports cake_run, returns `rc` and writes nothing (for generation and shape tests).
inline fs::path dummy_kernel(int rc = 0) {
  const fs::path dir = temp_root() / ("dummy-kernel-" + std::to_string(rc));
  const fs::path lib = dir / "kernel.so";
  if (fs::exists(lib)) return lib;
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.c")
      << "#include <stdint.h>\nint cake_run(const void* in, int n_in, void* out, int n_out,"
         " const double* p, int n_p) { (void)in; (void)n_in; (void)out; (void)n_out;"
         " (void)p; (void)n_p; return "
      << rc << "; }\n";
  const Cmd c = run({"cc", "-shared", "-fPIC", "-o", "kernel.so", "kernel.c"}, dir, 60);
  if (!c.ok()) throw Error("cannot build the dummy kernel: " + c.out);
  return lib;
}

// A report in the schema write_package documents, with figures derived from the standard cases.
inline nlohmann::json synthetic_report(const CheckedContract& c) {
  const target::MachineInfo& m = machine();
  const double bw = m.bandwidth_gbs > 0 ? m.bandwidth_gbs : 20, pk = m.fma_gflops > 0 ? m.fma_gflops : 100;
  nlohmann::json cs = nlohmann::json::array();
  for (const cases::Case& k : cases::make_cases(c, cases::Set::Standard)) {
    const double f = cases::case_flops(c, k), b = cases::case_bytes(c, k);
    const double floor = std::max(f / (pk * 1e9), b / (bw * 1e9));
    cs.push_back({{"id", k.id()},
                  {"describe", k.describe()},
                  {"dtype", std::string(dtype_name(k.dtype))},
                  {"verdict", "pass"},
                  {"mere", 1e-8},
                  {"mare", 3e-7},
                  {"t_cand_s", 2 * floor},
                  {"t_base_s", 3 * floor},
                  {"t_floor_s", floor},
                  {"flops", f},
                  {"bytes", b}});
  }
  return {
      {"operator", c.contract.name},
      {"contract_hash", c.hash},
      {"track", "simd"},
      {"knobs", {{"threads", 2}, {"vector", "native"}}},
      {"routing", {{"chosen", "simd"}, {"scores", {{"simd", 0.8}, {"halide", 0.6}}}, {"reason", "exploit"}}},
      {"machine", {{"bandwidth_gbs", bw}, {"fma_gflops", pk}, {"threads", m.logical_cores}}},
      {"set", "standard"},
      {"score", 78.1},
      {"pass_rate", 1.0},
      {"cases", cs},
      {"evolution",
       {{{"round", 0}, {"best_s", 1e-3}, {"efficiency", 0.4}},
        {{"round", 1}, {"best_s", 6e-4}, {"efficiency", 0.6}}}}};
}

// The delivered package of a bench operator, with its simd kernel, written under temp_root()/pkg/<op>.
inline const deliver::Package& bench_package(const std::string& op) {
  static std::map<std::string, deliver::Package> done;
  if (auto it = done.find(op); it != done.end()) return it->second;
  deliver::PackageInput in;
  in.contract = bench_contract(op);
  in.contract_file = fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml");
  in.kernel_library = simd_kernel(in.contract);
  in.report = synthetic_report(in.contract);
  return done[op] = deliver::write_package(in, temp_root() / "pkg" / op);
}

// The first standard case of this dtype whose tensors are small but not trivial (the smallest one when none
// is in range), so the tests run quickly.
inline cases::Case small_case(const CheckedContract& c, DType dt) {
  std::vector<cases::Case> v;
  for (const cases::Case& k : cases::make_cases(c, cases::Set::Standard))
    if (k.dtype == dt) v.push_back(k);
  if (v.empty()) throw Error("no standard case of " + c.contract.name + " in " + std::string(dtype_name(dt)));
  std::sort(v.begin(), v.end(), [&](const cases::Case& a, const cases::Case& b) {
    return cases::case_bytes(c, a) < cases::case_bytes(c, b);
  });
  for (const cases::Case& k : v)
    if (cases::case_bytes(c, k) >= 1024 && cases::case_bytes(c, k) <= (4 << 20)) return k;
  return v.front();
}

// ---- tensor files ("CAKEIO01", int32 n_tensors, int32 n_params, double params[], tensors) ----

inline void write_tensors(const fs::path& p, const std::vector<Tensor>& ts,
                          const std::vector<double>& params) {
  std::ofstream f(p, std::ios::binary);
  f.write("CAKEIO01", 8);
  const int32_t nt = static_cast<int32_t>(ts.size()), np = static_cast<int32_t>(params.size());
  f.write(reinterpret_cast<const char*>(&nt), 4);
  f.write(reinterpret_cast<const char*>(&np), 4);
  f.write(reinterpret_cast<const char*>(params.data()), static_cast<std::streamsize>(8 * params.size()));
  for (const Tensor& t : ts) {
    const int32_t dt = static_cast<int32_t>(t.dtype()), rank = t.rank();
    f.write(reinterpret_cast<const char*>(&dt), 4);
    f.write(reinterpret_cast<const char*>(&rank), 4);
    f.write(reinterpret_cast<const char*>(t.shape().data()), 8 * rank);
    f.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  }
  if (!f) throw Error("cannot write " + p.string());
}

inline std::vector<Tensor> read_tensors(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char magic[8] = {};
  int32_t nt = -1, np = -1;
  f.read(magic, 8);
  f.read(reinterpret_cast<char*>(&nt), 4);
  f.read(reinterpret_cast<char*>(&np), 4);
  if (!f || std::memcmp(magic, "CAKEIO01", 8) != 0 || nt < 0 || nt > 16 || np < 0 || np > 64)
    throw Error(p.string() + " is not a tensor file");
  f.ignore(8L * np);
  std::vector<Tensor> ts;
  for (int i = 0; i < nt; ++i) {
    int32_t dt = -1, rank = -1;
    f.read(reinterpret_cast<char*>(&dt), 4);
    f.read(reinterpret_cast<char*>(&rank), 4);
    if (!f || dt < 0 || dt > 6 || rank < 0 || rank > CAKE_MAX_RANK)
      throw Error(p.string() + ": bad tensor header");
    Shape s(static_cast<size_t>(rank));
    f.read(reinterpret_cast<char*>(s.data()), 8L * rank);
    Tensor t(static_cast<DType>(dt), s);
    f.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
    if (!f) throw Error(p.string() + ": truncated");
    ts.push_back(std::move(t));
  }
  return ts;
}

// A shared object loaded into this process (RTLD_LOCAL), for calling a package's C entry points.
class Lib {
 public:
  explicit Lib(const fs::path& p) : h_(dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (!h_) throw Error("cannot load " + p.string() + ": " + dlerror());
  }
  ~Lib() {
    if (h_) dlclose(h_);
  }
  Lib(const Lib&) = delete;
  Lib& operator=(const Lib&) = delete;
  void* sym(const char* name) const { return dlsym(h_, name); }
  template <class F>
  F fn(const char* name) const {
    void* s = sym(name);
    if (!s) throw Error(std::string("missing symbol ") + name);
    F f;
    std::memcpy(&f, &s, sizeof f);
    return f;
  }

 private:
  void* h_;
};

}  // namespace cake::deliver_test
