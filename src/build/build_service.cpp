// The build service: content-hash cache shared across processes, per-step timeouts, parallel builds,
// structured diagnostics.
#include "build/build_service.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "build/process.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/paths.h"

namespace cake::build {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCacheVersion = "cake-build-v1";
std::atomic<int> g_tool_runs{0};

// What identifies a tool: `--version` output for programs on PATH, the file's bytes for absolute paths
// (CAKE's own helper tools), nothing for "./x" (an earlier step's output, already covered by the hash).
std::string tool_identity(const std::string& tool) {
  static std::mutex mu;
  static std::map<std::string, std::string> memo;
  std::lock_guard lock(mu);
  if (auto it = memo.find(tool); it != memo.end()) return it->second;
  std::string id;
  if (tool.rfind("./", 0) == 0) {
    id = "local";
  } else if (!tool.empty() && tool[0] == '/') {
    id = hash_hex(read_file(tool).value_or("missing:" + tool));
  } else {
    const fs::path dir = fs::temp_directory_path() / ("cake-toolid-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path log = dir / "version.txt";
    fs::remove(log);
    const ProcessResult r = run_process({tool, "--version"}, dir, log, 30);
    id = r.started ? hash_hex(read_file(log).value_or("")) : "missing:" + tool;
    fs::remove_all(dir);
  }
  memo[tool] = id;
  return id;
}

nlohmann::json diag_json(const Diagnostic& d) {
  return {{"file", d.file},         {"line", d.line},       {"col", d.col},
          {"severity", d.severity}, {"message", d.message}, {"step", d.step}};
}

void save_result(const fs::path& dir, const BuildResult& r) {
  nlohmann::json j{{"status", status_name(r.status)}, {"failure", r.failure}, {"hash", r.hash}};
  j["diagnostics"] = nlohmann::json::array();
  for (const Diagnostic& d : r.diagnostics) j["diagnostics"].push_back(diag_json(d));
  write_file_atomic(dir / "result.json", j.dump(1));
}

bool load_result(const fs::path& dir, BuildResult& r) {
  auto text = read_file(dir / "result.json");
  if (!text) return false;
  try {
    auto j = nlohmann::json::parse(*text);
    const std::string s = j.at("status");
    if (s == "ok") {
      r.status = BuildStatus::Ok;
    } else if (s == "compile-error") {
      r.status = BuildStatus::CompileError;
    } else {
      return false;  // timeouts and missing tools are not cached
    }
    r.failure = j.value("failure", "");
    for (const auto& d : j.at("diagnostics")) {
      r.diagnostics.push_back(
          {d.at("file"), d.at("line"), d.at("col"), d.at("severity"), d.at("message"), d.at("step")});
    }
    r.log = read_file(dir / "build.log").value_or("");
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// An exclusive lock on cache/build/<hash>.lock, held while one process builds that hash.
class HashLock {
 public:
  explicit HashLock(const fs::path& p) : fd_(::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~HashLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  HashLock(const HashLock&) = delete;
  HashLock& operator=(const HashLock&) = delete;

 private:
  int fd_;
};

void sort_diagnostics(std::vector<Diagnostic>& ds) {
  auto rank = [](const Diagnostic& d) {
    return d.severity == "error" || d.severity == "fatal error" ? 0 : d.severity == "warning" ? 1 : 2;
  };
  std::stable_sort(ds.begin(), ds.end(),
                   [&](const Diagnostic& a, const Diagnostic& b) { return rank(a) < rank(b); });
}

BuildResult run_build(const tracks::Artifact& a, const BuildOptions& o, const fs::path& root,
                      const std::string& hash) {
  BuildResult r;
  r.hash = hash;
  const fs::path final_dir = root / hash;
  const fs::path tmp = root / (hash + ".tmp." + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (const tracks::SourceFile& f : a.files) {
    if (f.name.find('/') != std::string::npos) fs::create_directories((tmp / f.name).parent_path());
    std::ofstream out(tmp / f.name, std::ios::binary);
    out << f.text;
    if (!out) throw Error("build: cannot write " + (tmp / f.name).string());
  }
  const fs::path log = tmp / "build.log";
  std::string step_log_all;
  for (const tracks::BuildStep& s : a.steps) {
    const fs::path step_log = tmp / ("step-" + s.what + ".log");
    ++g_tool_runs;
    const ProcessResult p =
        run_process(s.argv, s.dir.empty() ? tmp : tmp / s.dir, step_log, o.step_timeout_s);
    std::string out = read_file(step_log).value_or("");
    step_log_all += "$ ";
    for (const std::string& x : s.argv) step_log_all += x + " ";
    step_log_all += "\n" + out;
    for (Diagnostic& d : parse_diagnostics(out, s.what)) r.diagnostics.push_back(std::move(d));
    if (!p.started) {
      r.status = BuildStatus::ToolMissing;
      r.failure = "step '" + s.what + "': cannot run '" + s.argv.at(0) + "'";
      break;
    }
    if (p.timed_out) {
      r.status = BuildStatus::Timeout;
      r.failure =
          "step '" + s.what + "' ran past " + std::to_string(static_cast<int>(o.step_timeout_s)) + " s";
      break;
    }
    if (p.exit_code != 0 || p.signal != 0) {
      r.status = BuildStatus::CompileError;
      r.failure = "step '" + s.what + "' " +
                  (p.signal ? "died with signal " + std::to_string(p.signal)
                            : "exited with " + std::to_string(p.exit_code));
      for (const Diagnostic& d : r.diagnostics) {
        if (d.severity == "error" || d.severity == "fatal error") {
          r.failure +=
              ": " + d.file + ":" + std::to_string(d.line) + ":" + std::to_string(d.col) + ": " + d.message;
          break;
        }
      }
      break;
    }
  }
  if (r.status == BuildStatus::Ok && !fs::exists(tmp / a.library)) {
    r.status = BuildStatus::CompileError;
    r.failure = "the recipe finished but produced no " + a.library;
  }
  sort_diagnostics(r.diagnostics);
  if (step_log_all.size() > 65536) step_log_all = step_log_all.substr(step_log_all.size() - 65536);
  r.log = step_log_all;
  {
    std::ofstream out(log, std::ios::binary);
    out << step_log_all;
  }
  if (r.status == BuildStatus::Ok || r.status == BuildStatus::CompileError) {
    save_result(tmp, r);
    std::error_code ec;
    fs::remove_all(final_dir, ec);
    fs::rename(tmp, final_dir, ec);
    if (ec) throw Error("build: cannot move " + tmp.string() + " into the cache: " + ec.message());
    r.directory = final_dir;
  } else {
    r.directory = tmp;  // kept for inspection; never served from the cache
  }
  r.library = r.directory / a.library;
  return r;
}

}  // namespace

std::string_view status_name(BuildStatus s) {
  switch (s) {
    case BuildStatus::Ok:
      return "ok";
    case BuildStatus::CompileError:
      return "compile-error";
    case BuildStatus::Timeout:
      return "timeout";
    case BuildStatus::ToolMissing:
      return "tool-missing";
  }
  return "?";
}

int tool_runs() {
  return g_tool_runs.load();
}

std::string artifact_hash(const tracks::Artifact& a) {
  Hasher h;
  h.add(kCacheVersion).add_u64(0).add(a.track).add_u64(1).add(a.op).add_u64(2).add(a.library).add_u64(3);
  for (const tracks::SourceFile& f : a.files)
    h.add(f.name).add_u64(f.name.size()).add(f.text).add_u64(f.text.size());
  for (const tracks::BuildStep& s : a.steps) {
    h.add_u64(4).add(s.what);
    if (!s.dir.empty()) h.add_u64(5).add(s.dir);
    for (const std::string& x : s.argv) h.add(x).add_u64(x.size());
    if (!s.argv.empty()) h.add(tool_identity(s.argv[0]));
  }
  return a.track + "-" + a.op + "-" + h.hex();
}

BuildResult build(const tracks::Artifact& a, const BuildOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (a.steps.empty()) throw Error("build: the artifact of " + a.op + "/" + a.track + " has no build steps");
  const fs::path root = cache_dir() / "build";
  fs::create_directories(root);
  const std::string hash = artifact_hash(a);
  BuildResult r;
  {
    HashLock lock(root / (hash + ".lock"));
    BuildResult cached;
    if (fs::exists(root / hash / "result.json") && load_result(root / hash, cached) &&
        (cached.status != BuildStatus::Ok || fs::exists(root / hash / a.library))) {
      r = std::move(cached);
      r.hash = hash;
      r.cache_hit = true;
      r.directory = root / hash;
      r.library = r.directory / a.library;
    } else {
      r = run_build(a, o, root, hash);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<BuildResult> build_all(const std::vector<tracks::Artifact>& as, const BuildOptions& o) {
  std::vector<BuildResult> out(as.size());
  int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::thread::hardware_concurrency());
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(as.size())));
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (;;) {
      const size_t i = next++;
      if (i >= as.size()) return;
      try {
        out[i] = build(as[i], o);
        if (o.progress) {
          std::lock_guard lock(mu);
          o.progress(as[i].op + "/" + as[i].track + ": " + std::string(status_name(out[i].status)) +
                     (out[i].cache_hit ? " (cached)" : ""));
        }
      } catch (...) {
        std::lock_guard lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> ts;
  ts.reserve(static_cast<size_t>(jobs));
  for (int j = 0; j < jobs; ++j) ts.emplace_back(worker);
  for (std::thread& t : ts) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

std::vector<Diagnostic> parse_diagnostics(std::string_view output, std::string_view step) {
  static const std::regex re(R"(^([^:\s][^:]*):(\d+):(\d+): (fatal error|error|warning|note): (.*)$)");
  std::vector<Diagnostic> ds;
  size_t pos = 0;
  while (pos < output.size()) {
    size_t end = output.find('\n', pos);
    if (end == std::string_view::npos) end = output.size();
    const std::string line(output.substr(pos, end - pos));
    std::smatch m;
    if (std::regex_match(line, m, re))
      ds.push_back({m[1], std::stoi(m[2]), std::stoi(m[3]), m[4], m[5], std::string(step)});
    pos = end + 1;
  }
  return ds;
}

}  // namespace cake::build
