// `cake generate`, `cake deliver` and `cake run` (DESIGN §10): the generation controller on one contract,
// then the operator package. generate writes the package only with -o; deliver requires -o; run is the
// main job — generation now (the evolution issue adds its rounds before delivery) — and writes the
// package to cake-out/<operator> unless -o says where.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agents/generation.h"
#include "cli/commands.h"
#include "core/error.h"
#include "deliver/package.h"
#include "skills/judge.h"

namespace cake::cli {

namespace {

enum class Mode { Generate, Deliver, Run };

struct Opts {
  std::string file, out, track;
  std::vector<std::string> knobs;
  bool json = false, no_baseline = false, no_explore = false;
  int threads = 0, max_attempts = 8;
};

// The package report (deliver/report.h renders it): the best kernel's cases plus routing and generation.
nlohmann::json package_report(const agents::GenerationResult& r, const skills::Session& s, const Opts& o) {
  const nlohmann::json& d = r.description;
  nlohmann::json predicted = nlohmann::json::object();
  for (const nlohmann::json& t : d["routing"]["tracks"])
    if (t["feasible"].get<bool>()) predicted[t["track"].get<std::string>()] = t["predicted"];
  nlohmann::json attempts = nlohmann::json::array();
  for (const agents::Attempt& a : r.attempts)
    attempts.push_back({{"track", a.track}, {"why", a.why}, {"outcome", a.outcome}, {"seconds", a.seconds}});
  const nlohmann::json& b = r.best;
  return {{"operator", r.operator_name},
          {"contract_hash", d["contract_hash"]},
          {"track", r.best_track},
          {"knobs", r.best_knobs},
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
            {"seconds_to_first_correct", r.seconds_to_first_correct},
            {"seconds", r.seconds}}},
          {"cases", b["cases"]}};
}

void add(CLI::App& app, Mode mode) {
  auto o = std::make_shared<Opts>();
  const char* name = mode == Mode::Generate ? "generate" : mode == Mode::Deliver ? "deliver" : "run";
  const char* what = mode == Mode::Generate  ? "the first correct kernel: route, lower, build, judge, repair"
                     : mode == Mode::Deliver ? "generate, then write the operator package to -o DIR"
                                             : "the main job: generate (then evolve) and deliver the package";
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
  cmd->add_flag("--no-baseline", o->no_baseline, "skip libtorch (the score then has no peer)");
  cmd->add_flag("--no-explore", o->no_explore, "judge only until the first correct kernel");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o, mode] {
    const bool tty = isatty(2) && !o->json;
    store::Store db = open_store();
    skills::Session s(db, target::describe_machine(), o->threads);
    s.baseline = !o->no_baseline;
    s.progress = tty;
    agents::GenerationOptions g;
    g.track = o->track;
    g.max_attempts = o->max_attempts;
    g.explore = !o->no_explore;
    for (const std::string& kv : o->knobs) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "cake %s: --knob wants name=value, got '%s'\n",
                     mode == Mode::Run ? "run" : "generate", kv.c_str());
        return set_exit_code(2);
      }
      g.start_knobs[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (!o->json)
      g.log = [&s](const std::string& line) {
        s.status("");
        std::fprintf(stderr, "%s\n", line.c_str());
      };
    s.begin_run(mode == Mode::Generate  ? "generate"
                : mode == Mode::Deliver ? "deliver"
                                        : "run",
                s.contract(o->file));
    const agents::GenerationResult r = agents::generate(s, o->file, g);
    nlohmann::json doc = agents::to_json(r);
    doc["run"] = *s.run;
    int code = r.ok ? 0 : 1;
    std::string out_dir = o->out;
    if (out_dir.empty() && mode == Mode::Run && r.ok) out_dir = "cake-out/" + r.operator_name;
    if (r.ok && !out_dir.empty()) {
      try {
        const deliver::Package p = deliver::write_package(
            {load_and_check(o->file), o->file, r.library, package_report(r, s, *o)}, out_dir);
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
      if (doc.contains("package"))
        std::printf("package: %s\n  library  %s\n  report   %s\n",
                    doc["package"]["dir"].get<std::string>().c_str(),
                    doc["package"]["library"].get<std::string>().c_str(),
                    doc["package"]["report"].get<std::string>().c_str());
      else
        std::printf("kernel: %s\n", r.library.c_str());
    } else {
      std::fprintf(stderr, "cake: no correct kernel for %s: %s\n", o->file.c_str(), r.why_none.c_str());
    }
    set_exit_code(code);
  });
}

}  // namespace

void add_generate_commands(CLI::App& app) {
  add(app, Mode::Generate);
  add(app, Mode::Run);
  add(app, Mode::Deliver);
}

}  // namespace cake::cli
