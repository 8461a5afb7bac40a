// The per-operator judging of CAKE-Bench: baseline process, sandboxed cases, timing, floor and score.
#include "cli/bench_run.h"

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

namespace cake::cli {

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
      if (j.contains("median_s"))
        b.seconds[i] = j["median_s"].get<double>();
      else
        b.why[i] = j.value("error", "no time reported");
    } catch (const std::exception&) {
    }
  }
#else
  (void)contract, (void)set, (void)n_cases, (void)threads;
  b.all_why = "built without libtorch (CAKE_BUILD_TORCH=OFF)";
#endif
  return b;
}

TrackRun bench_track(BenchContext& ctx, const CheckedContract& c, const std::string& file,
                     const tracks::Track& track, const target::MachineInfo& m, int64_t run_id,
                     const std::function<const BaselineTimes&(size_t)>& baseline) {
  TrackRun t;
  nlohmann::json& op = t.op;
  op = {{"file", file}, {"name", c.contract.name}, {"level", c.contract.level}, {"track", track.name()}};
  eval::OperatorResult& r = t.result;
  r = {c.contract.level, 0, 0, 0};
  const tracks::Feasibility f = track.feasible(c, m);
  t.feasible = f.ok;
  std::vector<eval::CaseResult> cr;
  bool ran = false;
  double sum_hap = 0, sum_eff = 0, log_speed = 0;
  int timed = 0;
  if (f.ok) {
    const tracks::Artifact a = track.lower(c, m, {});
    const build::BuildResult b = build::build(a);
    ctx.db
        .prepare(
            "INSERT INTO candidates(run_id, track, knobs_json, source_hash, artifact_path) VALUES (?, ?, ?, "
            "?, ?)")
        .bind(1, run_id)
        .bind(2, track.name())
        .bind(3, a.knobs.to_json().dump())
        .bind(4, b.hash)
        .bind(5, b.directory.string())
        .step();
    const int64_t cand = ctx.db.last_insert_rowid();
    op["build"] = build::status_name(b.status);
    t.built = b.ok();
    t.library = b.library;
    t.knobs = a.knobs.to_json();
    const std::vector<cases::Case> ks = cases::make_cases(c, ctx.set);
    static const BaselineTimes kNone{{}, {}, "the kernel did not build"};
    const BaselineTimes& base = b.ok() ? baseline(ks.size()) : kNone;
    for (const cases::Case& k : ks) {
      eval::CaseRun run;
      if (b.ok()) {
        eval::SandboxOptions so;
        so.time_it = true;
        so.threads = ctx.threads;
        so.wall_seconds = ctx.case_seconds;
        run = eval::run_sandboxed(b.library, file, k, so);
      } else {
        run.verdict = eval::Verdict::CompileError;
        run.detail = b.failure;
      }
      ran = ran || run.verdict != eval::Verdict::CompileError;
      const bool pass = run.verdict == eval::Verdict::Pass && run.timing;
      const double t_cand = pass ? run.timing->median_s : 0;
      std::string why;
      double t_base = pass ? base.get(k.index, why) : -1;
      if (t_base <= 0) t_base = t_cand;  // no baseline: HAP is 0.5 at best
      const double t_hw = eval::floor_seconds(eval::case_cost(c, k), ctx.peaks);
      cr.push_back({pass, t_cand, t_base, t_hw});
      ++r.cases;
      if (pass) {
        ++r.passed;
        ++timed;
        sum_hap += eval::hap(t_cand, t_base, t_hw);
        sum_eff += t_hw / t_cand;
        log_speed += std::log(t_base / t_cand);
      }
      double mere = 0, mare = 0;
      for (const eval::GateResult& g : run.gates) {
        mere = std::max(mere, g.mere);
        mare = std::max(mare, g.mare);
      }
      ctx.db
          .prepare(
              "INSERT INTO measurements(candidate_id, case_set, case_index, dtype, verdict, time_ns_median, "
              "time_ns_spread, mere, mare, efficiency) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
          .bind(1, cand)
          .bind(2, std::string(cases::set_name(k.set)))
          .bind(3, k.index)
          .bind(4, std::string(dtype_name(k.dtype)))
          .bind(5, std::string(eval::verdict_name(run.verdict)))
          .bind(6, t_cand * 1e9)
          .bind(7, run.timing ? run.timing->mad_s * 1e9 : 0.0)
          .bind(8, mere)
          .bind(9, mare)
          .bind(10, pass ? t_hw / t_cand : 0.0)
          .step();
      const eval::CaseCost cost = eval::case_cost(c, k);
      op["cases"].push_back({{"id", k.id()},
                             {"describe", k.describe()},
                             {"dtype", dtype_name(k.dtype)},
                             {"mere", mere},
                             {"mare", mare},
                             {"flops", cost.flops},
                             {"bytes", cost.bytes_read + cost.bytes_written},
                             {"verdict", eval::verdict_name(run.verdict)},
                             {"detail", run.detail},
                             {"t_cand_s", t_cand},
                             {"t_base_s", t_base},
                             {"t_floor_s", t_hw},
                             {"baseline_note", why}});
      if (ctx.tty)
        std::fprintf(stderr, "\r  %s %s %s: %s          ", c.contract.name.c_str(),
                     std::string(track.name()).c_str(), k.id().c_str(),
                     std::string(eval::verdict_name(run.verdict)).c_str());
    }
  } else {
    op["infeasible"] = f.reason;
  }
  r.score = eval::operator_score(ran, cr);
  op["score"] = r.score;
  op["passed"] = r.passed;
  op["total"] = r.cases;
  op["mean_hap"] = timed ? sum_hap / timed : 0;
  op["mean_efficiency"] = timed ? sum_eff / timed : 0;
  op["speedup_over_baseline"] = timed ? std::exp(log_speed / timed) : 0;
  return t;
}

eval::MachinePeaks peaks_for_threads(const target::MachineInfo& m, int threads) {
  // One thread cannot reach the all-core bandwidth or FMA rate.
  const bool one = threads == 1;
  return {(one ? m.fma_gflops_1t : m.fma_gflops) * 1e9, (one ? m.bandwidth_gbs_1t : m.bandwidth_gbs) * 1e9};
}

}  // namespace cake::cli
