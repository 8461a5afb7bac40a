// `cake bench [--suite DIR] [--set standard|hidden] [--ops a,b] [--track T[,T...]|all] [--json]
// [--no-baseline]`: CAKE-Bench over a suite. Per operator: time the libtorch baseline once (every case, same
// threads); per track: lower with its default knobs, build, run every case of the set in the sandbox with
// timing, compute the roofline floor, HAP and the score. Prints a row per (operator, track) and a level table
// per track; records the run, the candidate and every measurement in the store, and each (operator, track)
// score as a router outcome (L3), refitting the router's abilities at the end.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "build/build_service.h"
#include "build/process.h"
#include "cli/commands.h"
#include "contract/contract.h"
#include "core/error.h"
#include "core/paths.h"
#include "eval/sandbox.h"
#include "eval/score.h"
#include "profile/profile.h"
#include "router/gate.h"
#include "router/record.h"
#include "store/store.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::cli {

namespace fs = std::filesystem;

namespace {

// The libtorch baseline of one operator's whole case set, timed in one cake-torch-baseline process (libtorch
// loads once): case index → median seconds, or a negative value with the reason in `why[index]`.
struct BaselineTimes {
  std::map<int, double> seconds;
  std::map<int, std::string> why;
  std::string all_why;  // the reason for a case with no line of its own

  double get(int index, std::string& reason) const {
    if (auto it = seconds.find(index); it != seconds.end()) return it->second;
    auto w = why.find(index);
    reason = w != why.end() ? w->second : all_why;
    return -1;
  }
};

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

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream in(s);
  std::string x;
  while (std::getline(in, x, ','))
    if (!x.empty()) v.push_back(x);
  return v;
}

// What one track did on one operator.
struct TrackRun {
  nlohmann::json op;
  eval::OperatorResult result;
  bool feasible = false;
};

struct BenchContext {
  cases::Set set;
  int threads;
  double case_seconds;
  bool tty;
  eval::MachinePeaks peaks;
  store::Store& db;
};

// Lowers, builds and judges one track on one operator (the run row already exists). `baseline` is called
// once a kernel has built, and caches its answer.
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
      op["cases"].push_back({{"id", k.id()},
                             {"describe", k.describe()},
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

std::vector<const tracks::Track*> select_tracks(const std::string& spec) {
  std::vector<const tracks::Track*> out;
  if (spec == "all") {
    for (const tracks::Track* t : tracks::all_tracks()) out.push_back(t);
    return out;
  }
  for (const std::string& name : split(spec)) {
    const tracks::Track* t = tracks::find_track(name);
    if (!t) {
      std::string known;
      for (const tracks::Track* k : tracks::all_tracks())
        known += (known.empty() ? "" : ", ") + std::string(k->name());
      throw Error("cake bench: unknown track '" + name + "' (known: " + known + ", or all)");
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct Opts {
    std::string suite = "bench/ops", set = "standard", ops, track = "simd";
    bool json = false, no_baseline = false;
    int threads = 0;
    double case_seconds = 120;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("bench", "run CAKE-Bench: sandboxed cases, timing, baseline, roofline and score");
  cmd->add_option("--suite", o->suite, "folder of contracts")->capture_default_str();
  cmd->add_option("--set", o->set, "standard | hidden")->capture_default_str();
  cmd->add_option("--ops", o->ops, "comma-separated operator names (default: every contract in the suite)");
  cmd->add_option("--track", o->track, "tracks whose default-knob kernels are judged: a,b,... or all")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "threads for candidate and baseline (0: all usable cores)");
  cmd->add_option("--case-seconds", o->case_seconds, "wall-clock limit per case")->capture_default_str();
  cmd->add_flag(
      "--no-baseline", o->no_baseline,
      "skip libtorch (HAP then uses the candidate as its own baseline; no router outcome is recorded)");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    const bool tty = isatty(2) && !o->json;
    const cases::Set set = o->set == "hidden" ? cases::Set::Hidden : cases::Set::Standard;
    std::vector<const tracks::Track*> tracks;
    try {
      tracks = select_tracks(o->track);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return set_exit_code(2);
    }
    std::vector<std::string> files;
    const std::vector<std::string> wanted = split(o->ops);
    for (const auto& e : fs::directory_iterator(o->suite))
      if (e.path().extension() == ".yaml" &&
          (wanted.empty() ||
           std::find(wanted.begin(), wanted.end(), e.path().stem().string()) != wanted.end()))
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      std::fprintf(stderr, "cake bench: no contracts selected in %s\n", o->suite.c_str());
      return set_exit_code(2);
    }
    const target::MachineInfo m = target::describe_machine();
    const int threads = o->threads > 0 ? o->threads : m.logical_cores;
    // The floor uses the peaks of the thread count the kernels run with: one thread cannot reach the
    // all-core bandwidth or FMA rate.
    const bool one = threads == 1;
    const eval::MachinePeaks peaks{(one ? m.fma_gflops_1t : m.fma_gflops) * 1e9,
                                   (one ? m.bandwidth_gbs_1t : m.bandwidth_gbs) * 1e9};
    store::Store db = open_store();
    BenchContext ctx{set, threads, o->case_seconds, tty, peaks, db};
    const router::Key key{router::target_key(m)};
    const bool record = !o->no_baseline && set == cases::Set::Standard;
    nlohmann::json doc{
        {"set", o->set},
        {"tracks", nlohmann::json::array()},
        {"threads", threads},
        {"peaks", {{"fma_gflops", peaks.flops_per_s / 1e9}, {"bandwidth_gbs", peaks.bytes_per_s / 1e9}}}};
    for (const tracks::Track* t : tracks) doc["tracks"].push_back(t->name());
    doc["operators"] = nlohmann::json::array();
    std::map<std::string, std::vector<eval::OperatorResult>> results;  // per track
    int recorded = 0;
    if (!o->json)
      std::printf("%-18s %5s %-7s %7s %6s %8s %8s %8s\n", "operator", "level", "track", "cases", "score",
                  "HAP", "eff", "speedup");
    for (const std::string& file : files) {
      try {
        const CheckedContract c = load_and_check(file);
        const profile::Profile prof = profile::profile_of(c);
        db.prepare("INSERT INTO runs(command, contract_name, contract_hash, target_json) VALUES (?, ?, ?, ?)")
            .bind(1, "bench " + o->set)
            .bind(2, c.contract.name)
            .bind(3, c.hash)
            .bind(4, target::to_json(m).dump())
            .step();
        const int64_t run_id = db.last_insert_rowid();
        std::optional<BaselineTimes> base;
        const auto baseline = [&](size_t n_cases) -> const BaselineTimes& {
          if (!base) {
            base.emplace();
            base->all_why = "--no-baseline";
            if (!o->no_baseline) {
              if (tty)
                std::fprintf(stderr, "\r  %s: timing the libtorch baseline          ",
                             c.contract.name.c_str());
              *base = torch_baseline_times(file, set, n_cases, threads);
            }
          }
          return *base;
        };
        for (const tracks::Track* track : tracks) {
          TrackRun t = bench_track(ctx, c, file, *track, m, run_id, baseline);
          results[std::string(track->name())].push_back(t.result);
          if (record && t.feasible) {
            router::record_outcome(
                db, key,
                router::outcome_of(prof, c.contract.name, c.hash, std::string(track->name()), t.result.score),
                run_id);
            ++recorded;
          }
          if (tty) std::fprintf(stderr, "\r%*s\r", 70, "");
          if (!o->json)
            std::printf(
                "%-18s %5d %-7s %3d/%-3d %6.1f %8.3f %8.3f %8.2f%s\n", c.contract.name.c_str(),
                c.contract.level, std::string(track->name()).c_str(), t.result.passed, t.result.cases,
                t.result.score, t.op["mean_hap"].get<double>(), t.op["mean_efficiency"].get<double>(),
                t.op["speedup_over_baseline"].get<double>(),
                t.feasible ? "" : ("  (infeasible: " + t.op["infeasible"].get<std::string>() + ")").c_str());
          doc["operators"].push_back(std::move(t.op));
        }
      } catch (const Error& e) {
        doc["operators"].push_back({{"file", file}, {"error", e.what()}});
        if (!o->json) std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      }
    }
    doc["levels"] = nlohmann::json::array();
    if (!o->json)
      std::printf("\n%-8s %-7s %9s %10s %10s\n", "level", "track", "operators", "mean score", "pass rate");
    for (const tracks::Track* track : tracks) {
      const std::string name(track->name());
      for (const eval::LevelSummary& l : eval::summarize_levels(results[name])) {
        doc["levels"].push_back({{"track", name},
                                 {"level", l.level},
                                 {"operators", l.operators},
                                 {"mean_score", l.mean_score},
                                 {"cases", l.cases},
                                 {"passed", l.passed},
                                 {"pass_rate", l.pass_rate}});
        if (!o->json)
          std::printf("%-8s %-7s %9d %10.1f %9.1f%%\n", l.level ? std::to_string(l.level).c_str() : "all",
                      name.c_str(), l.operators, l.mean_score, 100 * l.pass_rate);
      }
    }
    if (recorded) {
      const router::Model fitted = router::refit(db, key);
      doc["router"] = {
          {"target", key.target}, {"recorded", recorded}, {"tracks_fitted", fitted.tracks.size()}};
      if (!o->json)
        std::printf(
            "\nrouter (%s): %d outcomes recorded, abilities of %zu tracks refitted (cake router fit --plot "
            "F)\n",
            key.target.c_str(), recorded, fitted.tracks.size());
    }
    if (o->json) std::printf("%s\n", doc.dump(2).c_str());
  });
}

}  // namespace cake::cli
