// `cake generate`, `cake evolve`, `cake deliver` and `cake run` (DESIGN §10): the generation controller on
// one contract, then Evolution rounds from its best kernel, then the operator package.
//   generate  the first correct kernel (a package only with -o)
//   evolve    generate, then --rounds N (default 20) of Evolution; --resume continues a killed run
//   deliver   generate (and --rounds N, default 0), then the package in -o DIR
//   run       the main job: generate, evolve (--rounds, default 3), deliver to cake-out/<operator> or -o
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "agents/generation.h"
#include "cli/commands.h"
#include "core/error.h"
#include "deliver/package.h"
#include "evolve/loop.h"
#include "skills/judge.h"

namespace cake::cli {

namespace {

using nlohmann::json;

enum class Mode { Generate, Evolve, Deliver, Run };

struct Opts {
  std::string file, out, track;
  std::vector<std::string> knobs;
  bool json = false, no_baseline = false, no_explore = false, resume = false;
  int threads = 0, max_attempts = 8, rounds = 0, variants = 4, confirm = 3;
  double min_time = 0.25;
};

// The package report (deliver/report.h renders it): the delivered kernel's cases, routing, generation and
// the evolution curve.
json package_report(const agents::GenerationResult& g, const std::optional<evolve::EvolveResult>& e,
                    const skills::Session& s, const Opts& o) {
  const json& d = g.description;
  json predicted = json::object();
  for (const json& t : d["routing"]["tracks"])
    if (t["feasible"].get<bool>()) predicted[t["track"].get<std::string>()] = t["predicted"];
  json attempts = json::array();
  for (const agents::Attempt& a : g.attempts)
    attempts.push_back({{"track", a.track}, {"why", a.why}, {"outcome", a.outcome}, {"seconds", a.seconds}});
  const bool evolved = e && e->ok;
  const json& b = evolved ? e->evaluation : g.best;
  json report{{"operator", g.operator_name},
              {"contract_hash", d["contract_hash"]},
              {"track", evolved ? e->track : g.best_track},
              {"knobs", evolved ? e->knobs : g.best_knobs},
              {"routing",
               {{"chosen", d["routing"]["chosen"]},
                {"deciding", d["routing"]["deciding"]},
                {"predicted", predicted},
                {"forced", !o.track.empty()}}},
              {"machine",
               {{"cpu", s.machine.cpu_model},
                {"bandwidth_gbs", s.peaks.bytes_per_s / 1e9},
                {"fma_gflops", s.peaks.flops_per_s / 1e9},
                {"threads", s.threads}}},
              {"set", b["set"]},
              {"score", b["score"]},
              {"pass_rate", b["total"].get<int>() ? b["passed"].get<double>() / b["total"].get<int>() : 0.0},
              {"speedup_over_baseline", b["speedup_over_baseline"]},
              {"baseline", s.baseline ? "libtorch" : "none"},
              {"generation",
               {{"attempts", attempts},
                {"seconds_to_first_correct", g.seconds_to_first_correct},
                {"seconds", g.seconds}}},
              {"cases", b["cases"]}};
  if (e) {
    report["evolution"] = evolve::curve(*e);
    report["evolution_stop"] = e->stop_reason;
    if (e->confirmation.is_object()) report["evolution_confirmation"] = e->confirmation;
  }
  return report;
}

void add(CLI::App& app, Mode mode) {
  auto o = std::make_shared<Opts>();
  o->rounds = mode == Mode::Evolve ? 20 : mode == Mode::Run ? 3 : 0;
  const char* name = mode == Mode::Generate  ? "generate"
                     : mode == Mode::Evolve  ? "evolve"
                     : mode == Mode::Deliver ? "deliver"
                                             : "run";
  const char* what = mode == Mode::Generate ? "the first correct kernel: route, lower, build, judge, repair"
                     : mode == Mode::Evolve
                         ? "generate, then rounds of Evolution (tiers, strategies, roofline stop)"
                     : mode == Mode::Deliver ? "generate, then write the operator package to -o DIR"
                                             : "the main job: generate, evolve and deliver the package";
  CLI::App* cmd = app.add_subcommand(name, what);
  cmd->add_option("contract", o->file, "contract file (YAML)")->required();
  auto* out = cmd->add_option("-o,--out", o->out,
                              mode == Mode::Run ? "package folder (default cake-out/<operator>)"
                                                : "package folder (created; its files are overwritten)");
  if (mode == Mode::Deliver) out->required();
  cmd->add_option("--track", o->track, "only this track (default: the router's order)");
  cmd->add_option("--knob,-k", o->knobs, "first attempt's knob name=value (repeatable)");
  cmd->add_option("--threads", o->threads, "threads for candidate and baseline (0: all usable cores)");
  cmd->add_option("--max-attempts", o->max_attempts, "lower + judge attempts over all tracks")
      ->capture_default_str();
  if (mode != Mode::Generate) {
    cmd->add_option("--rounds", o->rounds, "Evolution rounds after generation (0: none)")
        ->capture_default_str();
    cmd->add_option("--variants", o->variants, "variants per Evolution round")->capture_default_str();
    cmd->add_option("--confirm", o->confirm,
                    "at the stop, time the best and the seed this many more times each, alternately, and "
                    "deliver the best only if its median beats the seed's (0: no re-timing)")
        ->capture_default_str()
        ->check(CLI::Range(0, 20));
  }
  if (mode == Mode::Evolve)
    cmd->add_flag("--resume", o->resume, "continue this contract's latest unfinished evolve run");
  cmd->add_option("--min-time", o->min_time,
                  "seconds of timed calls per case for candidates (at least 5 calls; the median counts)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 10.0));
  cmd->add_flag("--no-baseline", o->no_baseline, "skip libtorch (the score then has no peer)");
  cmd->add_flag("--no-explore", o->no_explore, "judge only until the first correct kernel");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o, mode, name] {
    const bool tty = isatty(2) && !o->json;
    store::Store db = open_store();
    skills::Session s(db, target::describe_machine(), o->threads);
    s.baseline = !o->no_baseline;
    s.min_time_s = o->min_time;
    s.progress = tty;
    const auto log = [&s](const std::string& line) {
      s.status("");
      std::fprintf(stderr, "%s\n", line.c_str());
    };
    evolve::EvolveOptions eo;
    eo.rounds = o->rounds;
    eo.variants = o->variants;
    eo.confirm = o->confirm;
    if (!o->json) eo.log = log;
    json doc = json::object();
    std::optional<evolve::EvolveResult> evolved;
    if (o->resume) {
      const std::optional<int64_t> run = evolve::unfinished_run(db, s.contract(o->file).hash);
      if (!run) {
        std::fprintf(stderr, "cake evolve: no unfinished evolve run of %s to resume\n", o->file.c_str());
        return set_exit_code(1);
      }
      if (!o->json) log("resuming evolve run " + std::to_string(*run));
      evolved = evolve::resume(s, o->file, *run, eo);
      doc["evolution"] = {{"run", evolved->run},
                          {"rounds", evolve::curve(*evolved)},
                          {"stop_reason", evolved->stop_reason},
                          {"measured_now", evolved->measured_now},
                          {"confirmation", evolved->confirmation},
                          {"ok", evolved->ok}};
      if (o->json) {
        std::printf("%s\n", doc.dump(2).c_str());
      } else if (evolved->ok) {
        std::printf(
            "evolution run %lld: %zu round(s), %s; delivered %.4g s over the cases, efficiency %.3f\nkernel: "
            "%s\n",
            static_cast<long long>(evolved->run), evolved->rounds.size(), evolved->stop_reason.c_str(),
            evolved->evaluation.value("total_s", 0.0), evolved->evaluation.value("mean_efficiency", 0.0),
            evolved->library.c_str());
      } else {
        std::fprintf(stderr, "cake evolve: %s\n", evolved->why.c_str());
      }
      return set_exit_code(evolved->ok ? 0 : 1);
    }
    agents::GenerationOptions g;
    g.track = o->track;
    g.max_attempts = o->max_attempts;
    g.explore = !o->no_explore;
    for (const std::string& kv : o->knobs) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "cake %s: --knob wants name=value, got '%s'\n", name, kv.c_str());
        return set_exit_code(2);
      }
      g.start_knobs[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (!o->json) g.log = log;
    s.begin_run(name, s.contract(o->file));
    const agents::GenerationResult r = agents::generate(s, o->file, g);
    doc = agents::to_json(r);
    doc["run"] = *s.run;
    int code = r.ok ? 0 : 1;
    if (r.ok && o->rounds > 0) {
      for (const agents::Attempt& a : r.attempts)
        if (a.outcome == "correct" && a.track != r.best_track) eo.more_seeds.emplace_back(a.track, a.knobs);
      evolved = evolve::evolve(s, o->file, r.best_track, r.best_knobs, eo);
      const json& after = evolved->ok ? evolved->evaluation : r.best;
      // Before and after from the same evolve run (the confirmation timed both alternately; without one,
      // round 0 timed the seed), so that a busier or quieter machine between generation and evolution does
      // not show up as a gain or a loss.
      const json& before = evolved->seed_evaluation.is_object() ? evolved->seed_evaluation : r.best;
      doc["evolution"] = {{"run", evolved->run},
                          {"rounds", evolve::curve(*evolved)},
                          {"stop_reason", evolved->stop_reason},
                          {"confirmation", evolved->confirmation},
                          {"track", evolved->track},
                          {"knobs", evolved->knobs},
                          {"library", evolved->library},
                          {"before",
                           {{"total_s", before.value("total_s", 0.0)},
                            {"mean_efficiency", before["mean_efficiency"]},
                            {"score", before["score"]}}},
                          {"after",
                           {{"total_s", after.value("total_s", 0.0)},
                            {"mean_efficiency", after["mean_efficiency"]},
                            {"score", after["score"]}}}};
    }
    std::string out_dir = o->out;
    if (out_dir.empty() && mode == Mode::Run && r.ok) out_dir = "cake-out/" + r.operator_name;
    const std::string library = evolved && evolved->ok ? evolved->library : r.library;
    if (r.ok && !out_dir.empty()) {
      try {
        const deliver::Package p = deliver::write_package(
            {load_and_check(o->file), o->file, library, package_report(r, evolved, s, *o)}, out_dir);
        doc["package"] = {
            {"dir", p.dir.string()}, {"library", p.library.string()}, {"report", p.report_md.string()}};
      } catch (const Error& e) {
        doc["package_error"] = e.what();
        std::fprintf(stderr, "cake: the package was not written: %s\n", e.what());
        code = 1;
      }
    }
    if (o->json) {
      std::printf("%s\n", doc.dump(2).c_str());
    } else if (r.ok) {
      std::printf(
          "%s: %s kernel correct on %d/%d standard cases after %zu attempt(s), %.1f s; score %.1f, %.2fx "
          "the baseline\n",
          r.operator_name.c_str(), r.best_track.c_str(), r.best["passed"].get<int>(),
          r.best["total"].get<int>(), r.attempts.size(), r.seconds_to_first_correct,
          r.best["score"].get<double>(), r.best["speedup_over_baseline"].get<double>());
      if (doc.contains("evolution")) {
        const json& ev = doc["evolution"];
        std::printf(
            "evolution: %zu round(s), %s; %.4g s -> %.4g s over the cases, efficiency %.3f -> %.3f, score "
            "%.1f -> %.1f\n",
            ev["rounds"].size(), evolved->stop_reason.c_str(), ev["before"]["total_s"].get<double>(),
            ev["after"]["total_s"].get<double>(), ev["before"]["mean_efficiency"].get<double>(),
            ev["after"]["mean_efficiency"].get<double>(), ev["before"]["score"].get<double>(),
            ev["after"]["score"].get<double>());
      }
      if (doc.contains("package")) {
        std::printf("package: %s\n  library  %s\n  report   %s\n",
                    doc["package"]["dir"].get<std::string>().c_str(),
                    doc["package"]["library"].get<std::string>().c_str(),
                    doc["package"]["report"].get<std::string>().c_str());
      } else {
        std::printf("kernel: %s\n", library.c_str());
      }
    } else {
      std::fprintf(stderr, "cake: no correct kernel for %s: %s\n", o->file.c_str(), r.why_none.c_str());
    }
    set_exit_code(code);
  });
}

}  // namespace

void add_generate_commands(CLI::App& app) {
  add(app, Mode::Generate);
  add(app, Mode::Evolve);
  add(app, Mode::Run);
  add(app, Mode::Deliver);
}

}  // namespace cake::cli
