// cake-runner: the child side of the CAKE-Bench sandbox (eval/sandbox.h). Started (exec'd, never only
// forked: PoCL state does not survive a fork) by run_sandboxed with one argument, a directory holding
// request.json. It rebuilds the case, runs the untrusted kernel with guard pages after every output,
// NaN-filled outputs, an input hash and a late-write window, optionally times it, runs it again on the
// re-verification inputs, and leaves result.json and the raw outputs (run1_<i>.bin, run2_<i>.bin) in
// that directory. A fatal signal is reported to crash.txt by an async-signal-safe handler. The parent
// judges the outputs; this process is trusted only for signal, status, mutation and timing.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/kernel_abi.h"
#include "core/tensor.h"
#include "eval/timing.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- state the signal handler reads (plain data, set before any kernel code runs) ----

constexpr int kMaxRegions = 256;
enum RegionKind : int { kOther = 0, kGuard = 1, kFinished = 2 };
struct Region {
  uintptr_t lo, hi;
  int kind;
};
Region g_regions[kMaxRegions];
std::atomic<int> g_nregions{0};
int g_crash_fd = -1;
volatile sig_atomic_t g_stage = 0;  // index into kStages
const char* const kStages[] = {"setup", "load", "run1", "timing", "run2", "report"};
std::atomic<int> g_reported{0};

void add_region(const void* lo, size_t len, int kind) {
  const int i = g_nregions.load();
  if (i >= kMaxRegions) return;
  const auto a = reinterpret_cast<uintptr_t>(lo);
  g_regions[i] = {a, a + len, kind};
  g_nregions.store(i + 1);
}

// Appends s to buf at *n (async-signal-safe helpers).
void put_str(char* buf, size_t cap, size_t* n, const char* s) {
  while (*s != '\0' && *n + 1 < cap) buf[(*n)++] = *s++;
}
void put_uint(char* buf, size_t cap, size_t* n, uint64_t v, int base) {
  char tmp[32];
  int k = 0;
  do {
    const auto d = static_cast<int>(v % static_cast<uint64_t>(base));
    tmp[k++] = static_cast<char>(d < 10 ? '0' + d : 'a' + d - 10);
    v /= static_cast<uint64_t>(base);
  } while (v != 0 && k < 32);
  while (k > 0 && *n + 1 < cap) buf[(*n)++] = tmp[--k];
}

// "signal <n> addr 0x<hex> kind <k> stage <name>\n", then _exit: only async-signal-safe calls.
void on_fatal_signal(int sig, siginfo_t* si, void* /*ctx*/) {
  if (g_reported.exchange(1) == 0 && g_crash_fd >= 0) {
    const auto addr = reinterpret_cast<uintptr_t>(si->si_addr);
    int kind = kOther;
    const int nr = g_nregions.load();
    for (int i = 0; i < nr; ++i)
      if (addr >= g_regions[i].lo && addr < g_regions[i].hi) kind = g_regions[i].kind;
    char buf[256];
    size_t n = 0;
    put_str(buf, sizeof buf, &n, "signal ");
    put_uint(buf, sizeof buf, &n, static_cast<uint64_t>(sig), 10);
    put_str(buf, sizeof buf, &n, " addr 0x");
    put_uint(buf, sizeof buf, &n, addr, 16);
    put_str(buf, sizeof buf, &n, " kind ");
    put_uint(buf, sizeof buf, &n, static_cast<uint64_t>(kind), 10);
    put_str(buf, sizeof buf, &n, " stage ");
    const int st = g_stage;
    put_str(buf, sizeof buf, &n, kStages[st]);
    put_str(buf, sizeof buf, &n, "\n");
    const ssize_t w = ::write(g_crash_fd, buf, n);
    (void)w;
  }
  _exit(70);
}

void install_handlers() {
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(s, &sa, nullptr);
}

// ---- guarded output buffers ----

// One output: its bytes end exactly at a page boundary, followed by a PROT_NONE guard page. Never
// unmapped: a kernel thread still writing after the runner moved on must fault here, not in reused memory.
struct Guarded {
  char* base = nullptr;
  size_t body = 0;  // bytes before the guard page (whole pages)
  char* data = nullptr;
  size_t bytes = 0;
  cake::DType dtype = cake::DType::f32;
  cake::Shape shape;
};

size_t page_size() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

void fill_sentinel(const Guarded& g) {
  const size_t es = cake::dtype_size(g.dtype);
  const size_t n = es == 0 ? 0 : g.bytes / es;
  switch (g.dtype) {
    case cake::DType::f32: {
      const uint32_t nan = 0x7fc00000u;
      for (size_t i = 0; i < n; ++i) std::memcpy(g.data + i * 4, &nan, 4);
      break;
    }
    case cake::DType::f16:
    case cake::DType::bf16: {
      const uint16_t nan = g.dtype == cake::DType::f16 ? 0x7e00 : 0x7fc0;
      for (size_t i = 0; i < n; ++i) std::memcpy(g.data + i * 2, &nan, 2);
      break;
    }
    default:
      std::memset(g.data, 0x5a, g.bytes);  // integers and bool: a sentinel no kernel writes by chance
  }
}

Guarded make_guarded(cake::DType dt, const cake::Shape& shape) {
  Guarded g;
  g.dtype = dt;
  g.shape = shape;
  g.bytes = static_cast<size_t>(cake::shape_numel(shape)) * cake::dtype_size(dt);
  const size_t pg = page_size();
  g.body = (g.bytes + pg - 1) / pg * pg;
  void* p = mmap(nullptr, g.body + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  g.base = static_cast<char*>(p);
  if (mprotect(g.base + g.body, pg, PROT_NONE) != 0)
    throw std::runtime_error("mprotect of a guard page failed");
  add_region(g.base + g.body, pg, kGuard);
  g.data = g.base + g.body - g.bytes;
  fill_sentinel(g);
  return g;
}

// After the kernel returned: the output becomes read-only, so a write from a thread it left behind faults.
void seal(const Guarded& g) {
  if (g.body == 0) return;
  mprotect(g.base, g.body, PROT_READ);
  add_region(g.base, g.body, kFinished);
}

cake_tensor abi_of(const Guarded& g) {
  cake_tensor t{};
  t.data = g.data;
  t.dtype = static_cast<int32_t>(g.dtype);
  t.rank = static_cast<int32_t>(g.shape.size());
  const cake::Shape st = cake::contiguous_strides(g.shape);
  for (size_t d = 0; d < g.shape.size() && d < CAKE_MAX_RANK; ++d) {
    t.shape[d] = g.shape[d];
    t.stride[d] = st[d];
  }
  return t;
}

uint64_t hash_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h ^ n;
}

struct Runner {
  fs::path dir;
  json req;
  cake::CheckedContract c;
  cake::cases::Case k;
  cake_run_fn fn = nullptr;
  std::vector<double> params;
  json result = json::object();

  std::vector<Guarded> make_outputs() const {
    std::vector<Guarded> out;
    for (int id : c.output_ids()) {
      out.push_back(make_guarded(c.tensors[static_cast<size_t>(id)].dtype_for(k.dtype),
                                 cake::tensor_shape(c, id, k.sizes)));
    }
    return out;
  }

  // One checked call: status, input hash, late-write window. Returns false (result filled) on a failure.
  bool checked_call(const std::vector<cake::Tensor>& in, std::vector<Guarded>& out, const std::string& what) {
    std::vector<uint64_t> h0;
    std::vector<cake_tensor> ti, to;
    for (const cake::Tensor& t : in) {
      h0.push_back(hash_bytes(t.data(), t.nbytes()));
      ti.push_back(t.abi());
    }
    for (const Guarded& g : out) to.push_back(abi_of(g));
    int status = 0;
    try {
      status = fn(ti.data(), static_cast<int>(ti.size()), to.data(), static_cast<int>(to.size()),
                  params.data(), static_cast<int>(params.size()));
    } catch (const std::bad_alloc&) {
      return fail("out-of-memory", "the kernel threw std::bad_alloc" + what);
    } catch (const std::exception& e) {
      return fail("kernel-error", std::string("the kernel threw: ") + e.what() + what);
    } catch (...) {
      return fail("kernel-error", "the kernel threw an exception" + what);
    }
    for (const Guarded& g : out) seal(g);
    std::vector<uint64_t> oh;
    oh.reserve(out.size());
    for (const Guarded& g : out) oh.push_back(hash_bytes(g.data, g.bytes));
    if (status == CAKE_ERR_NOMEM) return fail("out-of-memory", "status 6 (CAKE_ERR_NOMEM)" + what);
    if (status != 0) {
      result["status"] = status;
      return fail("kernel-error", "status " + std::to_string(status) + what);
    }
    const auto in_ids = c.input_ids();
    for (size_t i = 0; i < in.size(); ++i) {
      if (hash_bytes(in[i].data(), in[i].nbytes()) != h0[i]) {
        return fail("input-mutated", "input '" + c.tensors[static_cast<size_t>(in_ids[i])].name +
                                         "' changed during the call" + what);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto out_ids = c.output_ids();
    for (size_t i = 0; i < out.size(); ++i) {
      if (hash_bytes(out[i].data, out[i].bytes) != oh[i]) {
        return fail("late-write", "output '" + c.tensors[static_cast<size_t>(out_ids[i])].name +
                                      "' changed after the kernel returned" + what);
      }
    }
    return true;
  }

  bool fail(const std::string& verdict, const std::string& detail) {
    result["verdict"] = verdict;
    result["detail"] = detail;
    return false;
  }

  void write_outputs(const std::vector<Guarded>& out, const std::string& prefix) const {
    for (size_t i = 0; i < out.size(); ++i) {
      std::ofstream f(dir / (prefix + std::to_string(i) + ".bin"), std::ios::binary);
      f.write(out[i].data, static_cast<std::streamsize>(out[i].bytes));
      if (!f) throw std::runtime_error("cannot write the outputs to " + dir.string());
    }
  }

  void time_kernel(const std::vector<cake::Tensor>& first) {
    size_t in_bytes = 0;
    for (const cake::Tensor& t : first) in_bytes += t.nbytes();
    const size_t n = req.value("rotate", true) ? cake::eval::input_sets(cake::cases::case_flops(c, k),
                                                                        cake::cases::case_bytes(c, k),
                                                                        static_cast<double>(in_bytes))
                                               : 1;
    std::vector<std::vector<cake::Tensor>> pool;
    for (size_t i = 1; i < n; ++i) {
      cake::cases::Case kp = k;
      kp.seed = cake::eval::input_set_seed(k.seed, i);
      pool.push_back(cake::cases::make_inputs(c, kp));
    }
    std::vector<std::vector<cake_tensor>> ti(n);
    for (const cake::Tensor& t : first) ti[0].push_back(t.abi());
    for (size_t i = 1; i < n; ++i)
      for (const cake::Tensor& t : pool[i - 1]) ti[i].push_back(t.abi());
    const std::vector<Guarded> out = make_outputs();  // preallocated and touched (sentinel-filled)
    std::vector<cake_tensor> to;
    to.reserve(out.size());
    for (const Guarded& g : out) to.push_back(abi_of(g));
    cake::eval::TimingOptions o;
    const json& tj = req.at("timing");
    o.warmup = tj.at("warmup");
    o.min_seconds = tj.at("min_seconds");
    o.min_reps = tj.at("min_reps");
    o.max_reps = tj.at("max_reps");
    o.max_seconds = tj.at("max_seconds");
    int bad = 0;
    const auto call = [&](int rep) {
      const size_t s = cake::eval::input_set_of(rep, n);
      const int st = fn(ti[s].data(), static_cast<int>(ti[s].size()), to.data(), static_cast<int>(to.size()),
                        params.data(), static_cast<int>(params.size()));
      if (st != 0 && bad == 0) bad = st;
    };
    const cake::eval::Timing t = cake::eval::time_calls(call, o);
    result["timing"] = t.to_json();
    result["timing_input_sets"] = n;
    if (bad != 0) result["timing_status"] = bad;
  }

  void run() {
    req = json::parse(std::ifstream(dir / "request.json"));
    c = cake::load_and_check(req.at("contract").get<std::string>());
    const json& kc = req.at("case");
    const auto dt = cake::parse_dtype(kc.at("dtype").get<std::string>());
    if (!dt) throw std::runtime_error("unknown dtype in the request");
    k = cake::cases::make_case(c, kc.at("free").get<std::map<std::string, int64_t>>(), *dt,
                               kc.at("seed").get<uint64_t>());
    k.set = kc.at("set") == "hidden" ? cake::cases::Set::Hidden : cake::cases::Set::Standard;
    k.index = kc.at("index");
    k.params = kc.at("params").get<std::vector<double>>();
    params = cake::cases::kernel_params(c, k);

    const std::vector<cake::Tensor> in1 = cake::cases::make_inputs(c, k);
    std::vector<Guarded> out1 = make_outputs();

    const auto mem = req.at("memory_bytes").get<int64_t>();
    if (mem > 0) {
      const rlimit rl{static_cast<rlim_t>(mem), static_cast<rlim_t>(mem)};
      setrlimit(RLIMIT_AS, &rl);
    }
    g_stage = 1;
    void* h = dlopen(req.at("library").get<std::string>().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      fail("compile-error", std::string("the library does not load: ") + (e != nullptr ? e : "?"));
      return;
    }
    fn = reinterpret_cast<cake_run_fn>(dlsym(h, "cake_run"));
    if (fn == nullptr) {
      fail("compile-error", "the library exports no cake_run");
      return;
    }

    g_stage = 2;
    if (!checked_call(in1, out1, "")) return;
    g_stage = 5;
    write_outputs(out1, "run1_");

    if (req.value("time_it", false)) {
      g_stage = 3;
      time_kernel(in1);
    }

    g_stage = 5;
    cake::cases::Case k2 = k;
    k2.seed = req.at("seed2").get<uint64_t>();
    const std::vector<cake::Tensor> in2 = cake::cases::make_inputs(c, k2);
    std::vector<Guarded> out2 = make_outputs();
    g_stage = 4;
    const bool ok2 = checked_call(in2, out2, " (re-verification inputs)");
    g_stage = 5;
    if (!ok2) return;
    write_outputs(out2, "run2_");
    result["verdict"] = "done";
  }
};

void write_result(const fs::path& dir, const json& j) {
  const fs::path tmp = dir / "result.json.tmp";
  {
    std::ofstream f(tmp);
    f << j.dump();
  }
  fs::rename(tmp, dir / "result.json");
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cake-runner <request directory>  (started by cake::eval::run_sandboxed)\n");
    return 2;
  }
  const fs::path dir = argv[1];
  g_crash_fd = ::open((dir / "crash.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  install_handlers();
  Runner r;
  r.dir = dir;
  try {
    r.run();
  } catch (const std::bad_alloc&) {
    r.result["verdict"] = "out-of-memory";
    r.result["detail"] = std::string("out of memory under the limit in the ") + kStages[g_stage] + " stage";
  } catch (const std::exception& e) {
    r.result["verdict"] = "harness-error";
    r.result["detail"] = std::string("cake-runner (") + kStages[g_stage] + "): " + e.what();
  }
  try {
    write_result(dir, r.result);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cake-runner: cannot write the result: %s\n", e.what());
    return 3;
  }
  std::fflush(nullptr);
  _exit(0);  // no static destructors: a kernel's threads may still be running
} catch (...) {
  _exit(4);  // the parent reports a runner that exits without a result
}
