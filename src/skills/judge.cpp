// The judging of CAKE-Bench (judge.h): baseline process, recorded candidates, sandboxed cases, timing, floor
// and score.
#include "skills/judge.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "build/build_service.h"
#include "build/process.h"
#include "core/paths.h"
#include "eval/sandbox.h"
#include "eval/timing.h"
#include "profile/profile.h"

namespace cake::skills {

namespace fs = std::filesystem;

double BaselineTimes::get(int index, std::string& reason) const {
  if (auto it = seconds.find(index); it != seconds.end()) return it->second;
  auto w = why.find(index);
  reason = w != why.end() ? w->second : all_why;
  return -1;
}

// Timed in one cake-torch-baseline process, so libtorch loads once.

BaselineTimes torch_baseline_times(const std::string& contract, cases::Set set, size_t n_cases, int threads) {
  BaselineTimes b;
#ifdef CAKE_TORCH_BASELINE_PATH
  const fs::path dir = fs::temp_directory_path() / fmt::format("cake-bench-{}", ::getpid());
  fs::create_directories(dir);
  const fs::path log = dir / "baseline.jsonl";
  fs::remove(log);
  const double limit = 60 + 30.0 * static_cast<double>(n_cases);
  const build::ProcessResult p =
      build::run_process({CAKE_TORCH_BASELINE_PATH, "--contract", fs::absolute(contract).string(), "--set",
                          std::string(cases::set_name(set)), "--all", "--threads", std::to_string(threads)},
                         dir, log, limit);
  std::stringstream lines(read_file(log).value_or(""));
  std::error_code ec;
  fs::remove_all(dir, ec);
  b.all_why = p.timed_out ? fmt::format("the baseline timed out after {:.0f} s", limit)
                          : "the baseline printed no line for this case";
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // libtorch's own warnings
    try {
      const auto j = nlohmann::json::parse(line);
      if (!j.contains("index")) {
        if (j.contains("error")) b.all_why = j["error"].get<std::string>();
        continue;
      }
      const int i = j["index"].get<int>();
      if (j.contains("median_s")) {
        b.seconds[i] = j["median_s"].get<double>();
      } else {
        b.why[i] = j.value("error", "no time reported");
      }
    } catch (const std::exception&) {
    }
  }
#else
  (void)contract, (void)set, (void)n_cases, (void)threads;
  b.all_why = "built without libtorch (CAKE_BUILD_TORCH=OFF)";
#endif
  return b;
}

Session::Session(store::Store& db_, target::MachineInfo m, int t)
    : db(db_),
      machine(std::move(m)),
      threads(t > 0 ? t : machine.logical_cores),
      peaks(peaks_for_threads(machine, threads)) {}

int64_t Session::begin_run(const std::string& command, const CheckedContract& c) {
  db.prepare("INSERT INTO runs(command, contract_name, contract_hash, target_json) VALUES (?, ?, ?, ?)")
      .bind(1, command)
      .bind(2, c.contract.name)
      .bind(3, c.hash)
      .bind(4, target::to_json(machine).dump())
      .step();
  run = db.last_insert_rowid();
  return *run;
}

const CheckedContract& Session::contract(const std::string& file) {
  auto it = contracts_.find(file);
  if (it == contracts_.end()) it = contracts_.emplace(file, load_and_check(file)).first;
  return it->second;
}

const BaselineTimes& Session::baseline_times(const std::string& file, cases::Set set, size_t n_cases) {
  const auto key = std::make_pair(file, set);
  auto it = baselines_.find(key);
  if (it != baselines_.end()) return it->second;
  BaselineTimes b;
  b.all_why = "no baseline (--no-baseline)";
  if (baseline) {
    status(fmt::format("{}: timing the libtorch baseline", fs::path(file).stem().string()));
    b = torch_baseline_times(file, set, n_cases, threads);
  }
  return baselines_.emplace(key, std::move(b)).first->second;
}

void Session::status(const std::string& line) const {
  if (!progress) return;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  if (line.empty()) std::fflush(stderr);
}

const Built& Session::remember(Built b) {
  const int64_t id = b.candidate;
  return built_.insert_or_assign(id, std::move(b)).first->second;
}

const Built* Session::built(int64_t candidate) const {
  auto it = built_.find(candidate);
  return it == built_.end() ? nullptr : &it->second;
}

Built lower_and_build(Session& s, const CheckedContract& c, const tracks::Track& track,
                      const tracks::Knobs& knobs, std::optional<int64_t> parent) {
  return build_candidate(s, c, track.lower(c, s.machine, knobs), parent);
}

Built build_candidate(Session& s, const CheckedContract& c, tracks::Artifact artifact,
                      std::optional<int64_t> parent) {
  Built out;
  out.artifact = std::move(artifact);
  s.status(fmt::format("{}: building {} {}", c.contract.name, out.artifact.track, out.artifact.knobs.str()));
  out.build = build::build(out.artifact);
  auto ins = s.db.prepare(
      "INSERT INTO candidates(run_id, track, knobs_json, source_hash, artifact_path, parent_id) "
      "VALUES (?, ?, ?, ?, ?, ?)");
  if (s.run) ins.bind(1, *s.run);
  ins.bind(2, out.artifact.track)
      .bind(3, out.artifact.knobs.to_json().dump())
      .bind(4, out.build.hash)
      .bind(5, out.build.directory.string());
  if (parent) ins.bind(6, *parent);
  ins.step();
  out.candidate = s.db.last_insert_rowid();
  return out;
}

Judgement judge(Session& s, const CheckedContract& c, const std::string& file, const Built& b, cases::Set set,
                bool timing) {
  Judgement j;
  nlohmann::json& op = j.op;
  const int level = profile::difficulty_of(c);
  op = {{"file", file},
        {"name", c.contract.name},
        {"level", level},
        {"track", b.artifact.track},
        {"knobs", b.artifact.knobs.to_json()},
        {"build", build::status_name(b.build.status)},
        {"set", std::string(cases::set_name(set))},
        {"timed", timing},
        {"cases", nlohmann::json::array()}};
  eval::OperatorResult& r = j.result;
  r = {level, 0, 0, 0};
  std::vector<eval::CaseResult> cr;
  bool ran = false;
  double sum_hap = 0, sum_eff = 0, log_speed = 0, total_s = 0;
  int timed = 0;
  const std::vector<cases::Case> ks = cases::make_cases(c, set);
  static const BaselineTimes kNone{{}, {}, "not timed"};
  const BaselineTimes& base = b.build.ok() && timing ? s.baseline_times(file, set, ks.size()) : kNone;
  for (const cases::Case& k : ks) {
    eval::CaseRun run;
    if (b.build.ok()) {
      s.status(fmt::format("{}: {} {} ({}/{})", c.contract.name, b.artifact.track, k.id(), r.cases + 1,
                           ks.size()));
      eval::SandboxOptions so;
      so.time_it = timing;
      so.threads = s.threads;
      so.wall_seconds = s.case_seconds;
      so.timing.min_seconds = s.min_time_s;
      run = eval::run_sandboxed(b.build.library, file, k, so);
    } else {
      run.verdict = eval::Verdict::CompileError;
      run.detail = b.build.failure;
    }
    ran = ran || run.verdict != eval::Verdict::CompileError;
    const bool correct = run.verdict == eval::Verdict::Pass;
    const bool has_time = correct && run.timing;
    const double t_cand = has_time ? run.timing->median_s : 0;
    std::string why;
    double t_base = has_time ? base.get(k.index, why) : -1;
    if (t_base <= 0) t_base = t_cand;  // no baseline: HAP is 0.5 at best
    const eval::CaseCost cost = eval::case_cost(c, k);
    const double t_hw = eval::floor_seconds(cost, s.peaks, run.timing_input_sets > 1);
    cr.push_back({correct, t_cand, t_base, t_hw});
    ++r.cases;
    if (correct) ++r.passed;
    if (has_time) {
      ++timed;
      total_s += t_cand;
      sum_hap += eval::hap(t_cand, t_base, t_hw);
      sum_eff += eval::efficiency(t_hw, t_cand);
      log_speed += std::log(t_base / t_cand);
    }
    double mere = 0, mare = 0;
    std::string gate_reason;
    for (const eval::GateResult& g : run.gates) {
      mere = std::max(mere, g.mere);
      mare = std::max(mare, g.mare);
      if (gate_reason.empty()) gate_reason = g.reason;
    }
    s.db.prepare(
            "INSERT INTO measurements(candidate_id, case_set, case_index, dtype, verdict, time_ns_median, "
            "time_ns_spread, mere, mare, efficiency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, b.candidate)
        .bind(2, std::string(cases::set_name(k.set)))
        .bind(3, k.index)
        .bind(4, std::string(dtype_name(k.dtype)))
        .bind(5, std::string(eval::verdict_name(run.verdict)))
        .bind(6, t_cand * 1e9)
        .bind(7, run.timing ? run.timing->mad_s * 1e9 : 0.0)
        .bind(8, mere)
        .bind(9, mare)
        .bind(10, has_time ? eval::efficiency(t_hw, t_cand) : 0.0)
        .step();
    op["cases"].push_back({{"id", k.id()},
                           {"describe", k.describe()},
                           {"dtype", dtype_name(k.dtype)},
                           {"mere", mere},
                           {"mare", mare},
                           {"gate", gate_reason},
                           {"flops", cost.flops},
                           {"bytes", cost.bytes_read + cost.bytes_written},
                           {"io_bytes", cases::case_bytes(c, k)},
                           {"sizes", k.free},
                           {"verdict", eval::verdict_name(run.verdict)},
                           {"detail", run.detail},
                           {"t_cand_s", t_cand},
                           {"t_base_s", t_base},
                           {"t_floor_s", t_hw},
                           {"baseline_note", why}});
  }
  s.status("");
  r.score = timing ? eval::operator_score(ran, cr) : 0;
  op["score"] = r.score;
  op["passed"] = r.passed;
  op["total"] = r.cases;
  op["total_s"] = total_s;
  op["mean_hap"] = timed ? sum_hap / timed : 0;
  op["mean_efficiency"] = timed ? sum_eff / timed : 0;
  op["speedup_over_baseline"] = timed ? std::exp(log_speed / timed) : 0;
  return j;
}

eval::MachinePeaks peaks_for_threads(const target::MachineInfo& m, int threads) {
  // One thread cannot reach the all-core bandwidth or FMA rate.
  const bool one = threads == 1;
  eval::MachinePeaks p;
  p.flops_per_s = (one ? m.fma_gflops_1t : m.fma_gflops) * 1e9;
  p.dot_flops_per_s = (one ? m.bf16_dot_gflops_1t : m.bf16_dot_gflops) * 1e9;
  p.bytes_per_s = (one ? m.bandwidth_gbs_1t : m.bandwidth_gbs) * 1e9;
  p.cache_bytes_per_s = m.cache_bandwidth_gbs_1t * 1e9 * std::max(1, std::min(threads, m.logical_cores));
  p.cache_bytes = double(m.caches.l2_bytes > 0 ? m.caches.l2_bytes : m.cache_triad_bytes);
  p.llc_bytes_per_s = (one ? m.llc_bandwidth_gbs_1t : m.llc_bandwidth_gbs) * 1e9;
  p.llc_bytes = double(m.llc_bytes);
  p.call_s = eval::call_floor_seconds();
  return p;
}

}  // namespace cake::skills
