// The parent side of the CAKE-Bench sandbox (see sandbox.h): writes the request, starts cake-runner in its
// own process group under a wall-clock limit, reads what it left behind, computes the reference itself and
// gates both runs' outputs.
#include "eval/sandbox.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "contract/contract.h"
#include "core/error.h"
#include "reference/reference.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, for posix_spawn

namespace cake::eval {

namespace fs = std::filesystem;
using nlohmann::json;

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Pass:
      return "pass";
    case Verdict::CompileError:
      return "compile-error";
    case Verdict::Crash:
      return "crash";
    case Verdict::Timeout:
      return "timeout";
    case Verdict::OutOfMemory:
      return "out-of-memory";
    case Verdict::KernelError:
      return "kernel-error";
    case Verdict::NoOutput:
      return "no-output";
    case Verdict::WrongResult:
      return "wrong-result";
    case Verdict::InputMutated:
      return "input-mutated";
    case Verdict::StaleResult:
      return "stale-result";
    case Verdict::OutOfBoundsWrite:
      return "out-of-bounds-write";
    case Verdict::LateWrite:
      return "late-write";
    case Verdict::HarnessError:
      return "harness-error";
  }
  return "harness-error";
}

uint64_t reverify_seed(const cases::Case& k) {
  uint64_t x = k.seed ^ 0x5eed5eed0f0f0f0full;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x == k.seed ? x + 1 : x;
}

fs::path runner_path() {
  if (const char* e = std::getenv("CAKE_RUNNER"); e != nullptr && *e != '\0') return e;
#ifdef CAKE_RUNNER_PATH
  return CAKE_RUNNER_PATH;
#else
  return "cake-runner";
#endif
}

namespace {

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string log_tail(const fs::path& p) {
  std::string s = slurp(p);
  if (s.size() > 300) s = s.substr(s.size() - 300);
  for (char& ch : s)
    if (ch == '\n') ch = ' ';
  return s;
}

struct Child {
  bool started = false;
  std::string error;
  bool timed_out = false;
  int status = 0;
};

// posix_spawn of the runner in its own process group; SIGKILL of the group at the deadline and after it
// exits (nothing the kernel started survives the case).
Child spawn_and_wait(const fs::path& dir, int threads, double wall_seconds) {
  Child ch;
  const std::string prog = runner_path().string(), arg = dir.string(), log = (dir / "log.txt").string();
  std::vector<std::string> env;
  // OpenMP (simd track, libtorch) and Halide's runtime (HL_NUM_THREADS) each size their pools from these.
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0 && std::strncmp(*e, "HL_NUM_THREADS=", 15) != 0)
      env.emplace_back(*e);
  env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  env.push_back("HL_NUM_THREADS=" + std::to_string(threads));
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<char*> argv = {const_cast<char*>(prog.c_str()), const_cast<char*>(arg.c_str()), nullptr};

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // the kernel gets none of the caller's files
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &defaults);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, prog.c_str(), &fa, &at, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0) {
    ch.error = "cannot start " + prog + ": " + std::strerror(rc);
    return ch;
  }
  ch.started = true;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.01, wall_seconds));
  auto nap = std::chrono::microseconds(200);
  for (;;) {
    const pid_t w = waitpid(pid, &ch.status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      ch.error = std::string("waitpid: ") + std::strerror(errno);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ch.timed_out = true;
      kill(-pid, SIGKILL);
      while (waitpid(pid, &ch.status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(10000));
  }
  kill(-pid, SIGKILL);  // stray processes the kernel started (ESRCH when there are none)
  return ch;
}

std::vector<Tensor> read_outputs(const CheckedContract& c, const cases::Case& k, const fs::path& dir,
                                 const std::string& prefix) {
  std::vector<Tensor> out = cases::make_outputs(c, k);
  for (size_t i = 0; i < out.size(); ++i) {
    const fs::path p = dir / (prefix + std::to_string(i) + ".bin");
    std::ifstream f(p, std::ios::binary);
    if (!f || fs::file_size(p) != out[i].nbytes())
      throw Error("cake-runner left no complete " + p.filename().string());
    f.read(static_cast<char*>(out[i].data()), static_cast<std::streamsize>(out[i].nbytes()));
  }
  return out;
}

// Every element of a float output still NaN where the reference is not: the kernel wrote nothing there.
bool nothing_written(const Tensor& got, const Tensor& want) {
  if (!is_float(got.dtype()) || got.numel() != want.numel()) return false;
  int64_t judged = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::isnan(want.get(i))) continue;
    ++judged;
    if (!std::isnan(got.get(i))) return false;
  }
  return judged > 0;
}

std::string worst_str(const CheckedContract& c, size_t out_index, const GateResult& g) {
  const std::string name = c.tensors[static_cast<size_t>(c.output_ids()[out_index])].name;
  return fmt::format("out {}[{}]: got {} want {} ({}, mere {:.3g}, mare {:.3g}, {} mismatches)", name,
                     g.worst, g.worst_got, g.worst_want, g.reason, g.mere, g.mare, g.mismatches);
}

Verdict verdict_of(const std::string& s) {
  for (Verdict v : {Verdict::CompileError, Verdict::OutOfMemory, Verdict::KernelError, Verdict::InputMutated,
                    Verdict::LateWrite, Verdict::HarnessError})
    if (verdict_name(v) == s) return v;
  return Verdict::HarnessError;
}

// What the crash report says: "signal <n> addr 0x<hex> kind <k> stage <name>".
bool read_crash(const fs::path& p, CaseRun& r) {
  std::error_code ec;
  if (!fs::exists(p, ec) || fs::file_size(p, ec) == 0) return false;
  std::istringstream s(slurp(p));
  std::string w_sig, w_addr, w_kind, w_stage, addr, stage;
  int sig = 0, kind = 0;
  s >> w_sig >> sig >> w_addr >> addr >> w_kind >> kind >> w_stage >> stage;
  const std::string where = stage == "run2"     ? " (re-verification inputs)"
                            : stage == "timing" ? " (timing)"
                                                : "";
  if (kind == 1) {
    r.verdict = Verdict::OutOfBoundsWrite;
    r.detail = fmt::format("{} at {} in the guard page after an output{}", signal_name(sig), addr, where);
  } else if (kind == 2) {
    r.verdict = Verdict::LateWrite;
    r.detail = fmt::format("{} at {}: a write to a finished output after the kernel returned",
                           signal_name(sig), addr);
  } else {
    r.verdict = Verdict::Crash;
    r.detail = fmt::format("{} at {} in stage {}", signal_name(sig), addr, stage);
  }
  return true;
}

void judge(const CheckedContract& c, const cases::Case& k, const fs::path& dir, const json& res, CaseRun& r) {
  // Run 1: the case's own inputs.
  const std::vector<Tensor> got1 = read_outputs(c, k, dir, "run1_");
  const std::vector<Tensor> want1 = reference::cached_outputs(c, k);
  for (size_t i = 0; i < want1.size(); ++i) r.gates.push_back(precision_gate(got1[i], want1[i]));
  for (size_t i = 0; i < want1.size(); ++i) {
    if (nothing_written(got1[i], want1[i])) {
      r.verdict = Verdict::NoOutput;
      r.detail = "output '" + c.tensors[static_cast<size_t>(c.output_ids()[i])].name + "' was never written";
      return;
    }
  }
  for (size_t i = 0; i < r.gates.size(); ++i) {
    if (!r.gates[i].pass) {
      r.verdict = Verdict::WrongResult;
      r.detail = worst_str(c, i, r.gates[i]);
      return;
    }
  }
  if (res.value("verdict", "") != "done") {  // the re-verification run failed in the child
    r.verdict = verdict_of(res.value("verdict", ""));
    r.detail = res.value("detail", "");
    return;
  }
  if (res.contains("timing_status")) {
    r.verdict = Verdict::KernelError;
    r.detail = fmt::format("status {} while timing", res["timing_status"].get<int>());
    return;
  }
  // Run 2: the re-verification inputs.
  cases::Case k2 = k;
  k2.seed = reverify_seed(k);
  const std::vector<Tensor> got2 = read_outputs(c, k2, dir, "run2_");
  const std::vector<Tensor> want2 = reference::cached_outputs(c, k2);  // keyed by seed: cached too
  for (size_t i = 0; i < want2.size(); ++i) {
    const GateResult g = precision_gate(got2[i], want2[i]);
    if (!g.pass) {
      r.verdict = Verdict::StaleResult;
      r.detail = "re-verification inputs: " + worst_str(c, i, g);
      return;
    }
  }
  r.verdict = Verdict::Pass;
  if (res.contains("timing")) {
    const json& t = res["timing"];
    Timing tm;
    tm.median_s = t.at("median_s");
    tm.min_s = t.at("min_s");
    tm.mad_s = t.at("mad_s");
    tm.reps = t.at("reps");
    r.timing = tm;
    r.timing_input_sets = res.value("timing_input_sets", 1);
  }
}

}  // namespace

CaseRun run_sandboxed(const fs::path& library, const std::string& contract_file, const cases::Case& k,
                      const SandboxOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  CaseRun r;
  fs::path dir;
  try {
    const CheckedContract c = load_and_check(contract_file);
    std::string tmpl = (fs::temp_directory_path() / "cake-sandbox-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw Error("cannot create a sandbox directory under /tmp");
    dir = tmpl;
    const double bytes = cases::case_bytes(c, k);
    const int64_t mem =
        o.memory_bytes > 0 ? o.memory_bytes : static_cast<int64_t>(4 * bytes) + (int64_t{2} << 30);
    json req = {
        {"library", fs::absolute(library).string()},
        {"contract", fs::absolute(contract_file).string()},
        {"case",
         {{"set", std::string(cases::set_name(k.set))},
          {"index", k.index},
          {"dtype", std::string(dtype_name(k.dtype))},
          {"free", k.free},
          {"seed", k.seed},
          {"params", k.params}}},
        {"seed2", reverify_seed(k)},
        {"memory_bytes", mem},
        {"time_it", o.time_it},
        {"rotate", o.rotate},
        {"timing",
         {{"warmup", o.timing.warmup},
          {"min_seconds", o.timing.min_seconds},
          {"min_reps", o.timing.min_reps},
          {"max_reps", o.timing.max_reps},
          {"max_seconds", o.timing.max_seconds}}},
    };
    {
      std::ofstream f(dir / "request.json");
      f << req.dump(1);
      if (!f) throw Error("cannot write " + (dir / "request.json").string());
    }
    const Child ch = spawn_and_wait(dir, o.threads > 0 ? o.threads : usable_cores(), o.wall_seconds);
    if (!ch.started || !ch.error.empty()) {
      r.verdict = Verdict::HarnessError;
      r.detail = ch.error;
    } else if (ch.timed_out) {
      r.verdict = Verdict::Timeout;
      r.detail = fmt::format("no result after {:.3g} s (process group killed)", o.wall_seconds);
    } else if (read_crash(dir / "crash.txt", r)) {
      // verdict and detail set from the crash report
    } else if (WIFSIGNALED(ch.status)) {
      const int sig = WTERMSIG(ch.status);
      r.verdict = sig == SIGKILL ? Verdict::OutOfMemory : Verdict::Crash;
      r.detail = sig == SIGKILL ? "killed by SIGKILL from outside the harness (the system's OOM killer?)"
                                : signal_name(sig) + " (not caught by the runner's handler)";
    } else if (!fs::exists(dir / "result.json")) {
      r.verdict = Verdict::Crash;
      r.detail = fmt::format("the runner exited with code {} before reporting: {}",
                             WIFEXITED(ch.status) ? WEXITSTATUS(ch.status) : -1, log_tail(dir / "log.txt"));
    } else {
      const json res = json::parse(slurp(dir / "result.json"));
      if (fs::exists(dir / "run1_0.bin")) {
        judge(c, k, dir, res, r);  // run 1 got through the child's checks: the parent judges its outputs
      } else {
        r.verdict = verdict_of(res.value("verdict", ""));
        r.detail = res.value("detail", "");
      }
    }
  } catch (const std::exception& e) {
    r.verdict = Verdict::HarnessError;
    r.detail = e.what();
  }
  if (!dir.empty() && std::getenv("CAKE_SANDBOX_KEEP") == nullptr) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace cake::eval
