// `cake bench [--suite DIR] [--set standard|hidden] [--ops a,b] [--track T[,T...]|all | --evolved] [--json]
// [--no-baseline]`: CAKE-Bench over a suite. Per operator: time the libtorch baseline once (every case, same
// threads); per track: lower with its default knobs, build, run every case of the set in the sandbox with
// timing, compute the roofline floor, HAP and the score. Prints a row per (operator, track) and a level table
// per track; records the run, the candidate and every measurement in the store, and each (operator, track)
// score as a router outcome (L3), refitting the router's abilities at the end. With --evolved, each
// operator's kernel is instead the best of its latest finished `cake evolve` run in the store (no router
// outcome).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "contract/contract.h"
#include "core/error.h"
#include "eval/score.h"
#include "evolve/loop.h"
#include "profile/profile.h"
#include "router/gate.h"
#include "router/record.h"
#include "skills/judge.h"
#include "store/store.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::cli {

namespace fs = std::filesystem;

namespace {

// One row: a track's default-knob kernel (or the evolved kernel) on one operator, or why there is none.
struct TrackRun {
  nlohmann::json op;
  eval::OperatorResult result;
  bool feasible = false;
};

TrackRun not_run(const CheckedContract& c, const std::string& file, const std::string& track,
                 const std::string& why) {
  TrackRun t;
  const int level = profile::difficulty_of(c);
  t.result = {level, 0, 0, 0};
  t.op = {{"file", file},
          {"name", c.contract.name},
          {"level", level},
          {"track", track},
          {"infeasible", why},
          {"score", 0},
          {"passed", 0},
          {"total", 0},
          {"mean_hap", 0},
          {"mean_efficiency", 0},
          {"speedup_over_baseline", 0}};
  return t;
}

// The best kernel of the operator's latest finished evolve run, rebuilt (a build-cache hit when the run's
// artifacts are still there) and judged; row "evolved", with the run, track and knobs it came from.
TrackRun bench_evolved(skills::Session& s, const CheckedContract& c, const std::string& file,
                       cases::Set set) {
  const std::optional<evolve::Evolved> e = evolve::latest_evolved(s.db, c.hash);
  if (!e)
    return not_run(c, file, "evolved", "no finished evolve run in the store (cake evolve " + file + ")");
  TrackRun t;
  t.feasible = true;
  skills::Judgement j = skills::judge(
      s, c, file, skills::build_candidate(s, c, evolve::variant_artifact(s, c, e->track, e->knobs)), set);
  t.op = std::move(j.op);
  t.op["track"] = "evolved";
  t.op["evolved"] = {{"run", e->run}, {"track", e->track}, {"knobs", e->knobs}};
  t.result = j.result;
  return t;
}

TrackRun bench_track(skills::Session& s, const CheckedContract& c, const std::string& file,
                     const tracks::Track& track, cases::Set set) {
  if (const tracks::Feasibility f = track.feasible(c, s.machine); !f.ok)
    return not_run(c, file, std::string(track.name()), f.reason);
  TrackRun t;
  t.feasible = true;
  skills::Judgement j = skills::judge(s, c, file, skills::lower_and_build(s, c, track, {}), set);
  t.op = std::move(j.op);
  t.result = j.result;
  return t;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream in(s);
  std::string x;
  while (std::getline(in, x, ','))
    if (!x.empty()) v.push_back(x);
  return v;
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
    bool json = false, no_baseline = false, evolved = false;
    int threads = 0;
    double case_seconds = 120;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("bench", "run CAKE-Bench: sandboxed cases, timing, baseline, roofline and score");
  cmd->add_option("--suite", o->suite, "folder of contracts")->capture_default_str();
  cmd->add_option("--set", o->set, "standard | hidden")
      ->capture_default_str()
      ->check(CLI::IsMember({"standard", "hidden"}));
  cmd->add_option("--ops", o->ops, "comma-separated operator names (default: every contract in the suite)");
  cmd->add_option("--track", o->track, "tracks whose default-knob kernels are judged: a,b,... or all")
      ->capture_default_str();
  cmd->add_flag(
      "--evolved", o->evolved,
      "judge each operator's evolved kernel (the best of its latest finished cake evolve run in the "
      "store) instead of the tracks' defaults");
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
      if (!o->evolved) tracks = select_tracks(o->track);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return set_exit_code(2);
    }
    std::error_code ec;
    if (!fs::is_directory(o->suite, ec)) {
      std::fprintf(stderr,
                   "cake bench: no suite folder '%s' (run from the repository root, or pass --suite DIR)\n",
                   o->suite.c_str());
      return set_exit_code(2);
    }
    std::vector<std::string> files;
    std::vector<std::string> wanted = split(o->ops);
    for (const auto& e : fs::directory_iterator(o->suite)) {
      if (e.path().extension() == ".yaml" &&
          (wanted.empty() ||
           std::find(wanted.begin(), wanted.end(), e.path().stem().string()) != wanted.end()))
        files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) std::erase(wanted, fs::path(f).stem().string());
    if (!wanted.empty()) {
      std::fprintf(stderr, "cake bench: no contract %s.yaml in %s\n", wanted.front().c_str(),
                   o->suite.c_str());
      return set_exit_code(2);
    }
    if (files.empty()) {
      std::fprintf(stderr, "cake bench: no contracts selected in %s\n", o->suite.c_str());
      return set_exit_code(2);
    }
    const target::MachineInfo m = target::describe_machine();
    const int threads = o->threads > 0 ? o->threads : m.logical_cores;
    store::Store db = open_store();
    skills::Session session(db, m, threads);
    session.case_seconds = o->case_seconds;
    session.baseline = !o->no_baseline;
    session.progress = tty;
    const eval::MachinePeaks& peaks = session.peaks;
    const router::Key key{router::target_key(m)};
    const bool record = !o->no_baseline && set == cases::Set::Standard && !o->evolved;
    std::vector<std::string> row_names;  // one row per operator and name: the tracks, or "evolved"
    row_names.reserve(tracks.size() + 1);
    for (const tracks::Track* t : tracks) row_names.emplace_back(t->name());
    if (o->evolved) row_names.emplace_back("evolved");
    nlohmann::json doc{
        {"set", o->set},
        {"tracks", nlohmann::json::array()},
        {"threads", threads},
        {"peaks", {{"fma_gflops", peaks.flops_per_s / 1e9}, {"bandwidth_gbs", peaks.bytes_per_s / 1e9}}}};
    for (const std::string& name : row_names) doc["tracks"].push_back(name);
    doc["operators"] = nlohmann::json::array();
    std::map<std::string, std::vector<eval::OperatorResult>> results;  // per track
    int recorded = 0;
    // The table of operators goes to stdout, or to stderr as progress when stdout holds the JSON document
    // (a whole suite takes a quarter of an hour).
    FILE* const rows_out = o->json ? stderr : stdout;
    std::fprintf(rows_out, "%-18s %5s %-7s %7s %6s %8s %8s %8s\n", "operator", "level", "track", "cases",
                 "score", "HAP", "eff", "speedup");
    for (const std::string& file : files) {
      try {
        const CheckedContract c = load_and_check(file);
        const profile::Profile prof = profile::profile_of(c);
        const int64_t run_id = session.begin_run("bench " + o->set, c);
        for (size_t r = 0; r < row_names.size(); ++r) {
          const std::string& name = row_names[r];
          TrackRun t = r < tracks.size() ? bench_track(session, c, file, *tracks[r], set)
                                         : bench_evolved(session, c, file, set);
          results[name].push_back(t.result);
          if (record && t.feasible) {
            router::record_outcome(
                db, key, router::outcome_of(prof, c.contract.name, c.hash, name, t.result.score), run_id);
            ++recorded;
          }
          std::fprintf(
              rows_out, "%-18s %5d %-7s %3d/%-3d %6.1f %8.3f %8.3f %8.2f%s\n", c.contract.name.c_str(),
              prof.difficulty, name.c_str(), t.result.passed, t.result.cases, t.result.score,
              t.op["mean_hap"].get<double>(), t.op["mean_efficiency"].get<double>(),
              t.op["speedup_over_baseline"].get<double>(),
              t.feasible ? "" : ("  (infeasible: " + t.op["infeasible"].get<std::string>() + ")").c_str());
          doc["operators"].push_back(std::move(t.op));
        }
      } catch (const Error& e) {
        doc["operators"].push_back({{"file", file}, {"error", e.what()}});
        std::fprintf(stderr, "%s: %s\n", file.c_str(), e.what());
      }
    }
    doc["levels"] = nlohmann::json::array();
    if (!o->json)
      std::printf("\n%-8s %-7s %9s %10s %10s\n", "level", "track", "operators", "mean score", "pass rate");
    for (const std::string& name : row_names) {
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
