// `cake bench [--suite DIR] [--set standard|hidden] [--ops a,b] [--track T] [--json] [--no-baseline]`:
// CAKE-Bench over a suite. Per operator: lower with the track (simd until the router of the generation
// issue chooses), build, run every case of the set in the sandbox with timing, time the libtorch baseline
// on the same case with the same threads, compute the roofline floor, HAP and the score; print a table
// per operator and per level, and record the run, the candidate and every measurement in the store.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build/build_service.h"
#include "build/process.h"
#include "cli/commands.h"
#include "contract/contract.h"
#include "core/error.h"
#include "core/paths.h"
#include "eval/sandbox.h"
#include "eval/score.h"
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
  cmd->add_option("--track", o->track, "track whose default-knob kernel is judged")->capture_default_str();
  cmd->add_option("--threads", o->threads, "threads for candidate and baseline (0: all usable cores)");
  cmd->add_option("--case-seconds", o->case_seconds, "wall-clock limit per case")->capture_default_str();
  cmd->add_flag("--no-baseline", o->no_baseline,
                "skip libtorch (HAP then uses the candidate as its own baseline)");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    const bool tty = isatty(2) && !o->json;
    const cases::Set set = o->set == "hidden" ? cases::Set::Hidden : cases::Set::Standard;
    const tracks::Track* track = tracks::find_track(o->track);
    if (!track) {
      std::fprintf(stderr, "cake bench: unknown track '%s'\n", o->track.c_str());
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
    store::Store db;
    nlohmann::json doc{
        {"set", o->set},
        {"track", o->track},
        {"threads", threads},
        {"peaks", {{"fma_gflops", peaks.flops_per_s / 1e9}, {"bandwidth_gbs", peaks.bytes_per_s / 1e9}}}};
    doc["operators"] = nlohmann::json::array();
    std::vector<eval::OperatorResult> results;
    if (!o->json)
      std::printf("%-18s %5s %-7s %7s %6s %8s %8s %8s\n", "operator", "level", "track", "cases", "score",
                  "HAP", "eff", "speedup");
    for (const std::string& file : files) {
      nlohmann::json op{{"file", file}};
      try {
        const CheckedContract c = load_and_check(file);
        op["name"] = c.contract.name;
        op["level"] = c.contract.level;
        db.prepare("INSERT INTO runs(command, contract_name, contract_hash, target_json) VALUES (?, ?, ?, ?)")
            .bind(1, "bench " + o->set)
            .bind(2, c.contract.name)
            .bind(3, c.hash)
            .bind(4, target::to_json(m).dump())
            .step();
        const int64_t run_id = db.last_insert_rowid();
        const tracks::Feasibility f = track->feasible(c, m);
        eval::OperatorResult r{c.contract.level, 0, 0, 0};
        std::vector<eval::CaseResult> cr;
        bool ran = false;
        double sum_hap = 0, sum_eff = 0, log_speed = 0;
        int timed = 0;
        if (f.ok) {
          const tracks::Artifact a = track->lower(c, m, {});
          const build::BuildResult b = build::build(a);
          db.prepare(
                "INSERT INTO candidates(run_id, track, knobs_json, source_hash, artifact_path) VALUES (?, ?, "
                "?, ?, ?)")
              .bind(1, run_id)
              .bind(2, o->track)
              .bind(3, a.knobs.to_json().dump())
              .bind(4, b.hash)
              .bind(5, b.directory.string())
              .step();
          const int64_t cand = db.last_insert_rowid();
          op["build"] = build::status_name(b.status);
          const std::vector<cases::Case> ks = cases::make_cases(c, set);
          BaselineTimes base;
          base.all_why = "--no-baseline";
          if (!o->no_baseline && b.ok()) {
            if (tty)
              std::fprintf(stderr, "\r  %s: timing the libtorch baseline          ", c.contract.name.c_str());
            base = torch_baseline_times(file, set, ks.size(), threads);
          }
          for (const cases::Case& k : ks) {
            eval::CaseRun run;
            if (b.ok()) {
              eval::SandboxOptions so;
              so.time_it = true;
              so.threads = threads;
              so.wall_seconds = o->case_seconds;
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
            const double t_hw = eval::floor_seconds(eval::case_cost(c, k), peaks);
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
            db.prepare(
                  "INSERT INTO measurements(candidate_id, case_set, case_index, dtype, verdict, "
                  "time_ns_median, "
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
            if (tty)
              std::fprintf(stderr, "\r  %s %s: %s          ", c.contract.name.c_str(), k.id().c_str(),
                           std::string(eval::verdict_name(run.verdict)).c_str());
          }
        } else {
          op["infeasible"] = f.reason;
        }
        r.score = eval::operator_score(ran, cr);
        results.push_back(r);
        op["score"] = r.score;
        op["passed"] = r.passed;
        op["total"] = r.cases;
        op["mean_hap"] = timed ? sum_hap / timed : 0;
        op["mean_efficiency"] = timed ? sum_eff / timed : 0;
        op["speedup_over_baseline"] = timed ? std::exp(log_speed / timed) : 0;
        if (tty) std::fprintf(stderr, "\r%*s\r", 60, "");
        if (!o->json)
          std::printf("%-18s %5d %-7s %3d/%-3d %6.1f %8.3f %8.3f %8.2f\n", c.contract.name.c_str(),
                      c.contract.level, o->track.c_str(), r.passed, r.cases, r.score,
                      op["mean_hap"].get<double>(), op["mean_efficiency"].get<double>(),
                      op["speedup_over_baseline"].get<double>());
      } catch (const Error& e) {
        op["error"] = e.what();
        if (!o->json) std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      }
      doc["operators"].push_back(std::move(op));
    }
    doc["levels"] = nlohmann::json::array();
    if (!o->json) std::printf("\n%-8s %9s %10s %10s\n", "level", "operators", "mean score", "pass rate");
    for (const eval::LevelSummary& l : eval::summarize_levels(results)) {
      doc["levels"].push_back({{"level", l.level},
                               {"operators", l.operators},
                               {"mean_score", l.mean_score},
                               {"cases", l.cases},
                               {"passed", l.passed},
                               {"pass_rate", l.pass_rate}});
      if (!o->json)
        std::printf("%-8s %9d %10.1f %9.1f%%\n", l.level ? std::to_string(l.level).c_str() : "all",
                    l.operators, l.mean_score, 100 * l.pass_rate);
    }
    if (o->json) std::printf("%s\n", doc.dump(2).c_str());
  });
}

}  // namespace cake::cli
