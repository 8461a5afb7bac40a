// `cake deliver <contract> -o DIR [--track T] [--threads N] [--no-baseline] [--json]`: the deployable
// operator package (DESIGN §9). Routes the contract (or takes --track), lowers and builds that track's
// kernel, judges it on the standard cases exactly as `cake bench` does, and only when every case passes
// writes the package: C library with the typed entry points, header, CMake package, PyTorch op, report.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/bench_run.h"
#include "cli/commands.h"
#include "core/error.h"
#include "deliver/package.h"
#include "profile/profile.h"
#include "router/gate.h"
#include "router/record.h"

namespace cake::cli {

void add_deliver_command(CLI::App& app) {
  struct Opts {
    std::string file, out, track;
    bool json = false, no_baseline = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("deliver", "route, build and verify a kernel, then write its operator package");
  cmd->add_option("contract", o->file, "contract file (YAML)")->required();
  cmd->add_option("-o,--out", o->out, "package folder (created; files in it are overwritten)")->required();
  cmd->add_option("--track", o->track, "use this track instead of the router's choice");
  cmd->add_option("--threads", o->threads, "threads for candidate and baseline (0: all usable cores)");
  cmd->add_flag("--no-baseline", o->no_baseline, "skip the libtorch baseline (the score then has no peer)");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    const auto fail = [&](const std::string& why) {
      if (o->json) std::printf("%s\n", nlohmann::json{{"file", o->file}, {"error", why}}.dump(2).c_str());
      std::fprintf(stderr, "cake deliver: %s\n", why.c_str());
      set_exit_code(1);
    };
    CheckedContract c = load_and_check(o->file);
    const target::MachineInfo m = target::describe_machine();
    store::Store db = open_store();
    const router::Key key{router::target_key(m)};
    const profile::Profile prof = profile::profile_of(c);
    const router::Decision d =
        router::decide(router::load_model(db, key), prof, router::feasibility_gate(c, m));
    const std::string track_name = o->track.empty() ? d.chosen : o->track;
    if (track_name.empty()) return fail("no track can lower " + c.contract.name + ": " + d.abstain_reason);
    const tracks::Track* track = tracks::find_track(track_name);
    if (!track) return fail("unknown track '" + track_name + "'");
    const int threads = o->threads > 0 ? o->threads : m.logical_cores;
    const bool tty = isatty(2) && !o->json;
    if (tty)
      std::fprintf(stderr, "%s: track %s (%s)\n", c.contract.name.c_str(), track_name.c_str(),
                   o->track.empty() ? ("router, deciding: " + d.deciding).c_str() : "--track");
    db.prepare("INSERT INTO runs(command, contract_name, contract_hash, target_json) VALUES (?, ?, ?, ?)")
        .bind(1, "deliver")
        .bind(2, c.contract.name)
        .bind(3, c.hash)
        .bind(4, target::to_json(m).dump())
        .step();
    const int64_t run_id = db.last_insert_rowid();
    BenchContext ctx{cases::Set::Standard, threads, 120, tty, peaks_for_threads(m, threads), db};
    std::optional<BaselineTimes> base;
    const auto baseline = [&](size_t n) -> const BaselineTimes& {
      if (!base) {
        base.emplace();
        base->all_why = "--no-baseline";
        if (!o->no_baseline) *base = torch_baseline_times(o->file, cases::Set::Standard, n, threads);
      }
      return *base;
    };
    const TrackRun t = bench_track(ctx, c, o->file, *track, m, run_id, baseline);
    if (tty) std::fprintf(stderr, "\r%*s\r", 70, "");
    if (!t.feasible)
      return fail(track_name + " cannot lower " + c.contract.name + ": " +
                  t.op["infeasible"].get<std::string>());
    if (!o->no_baseline)
      router::record_outcome(
          db, key, router::outcome_of(prof, c.contract.name, c.hash, track_name, t.result.score), run_id);
    if (!t.built)
      return fail("the " + track_name + " kernel did not build:\n" +
                  t.op["cases"][0]["detail"].get<std::string>());
    if (t.result.passed != t.result.cases) {
      std::string failed;
      for (const auto& k : t.op["cases"])
        if (k["verdict"] != "pass") {
          failed = k["id"].get<std::string>() + " " + k["verdict"].get<std::string>() + ": " +
                   k["detail"].get<std::string>();
          break;
        }
      return fail(std::to_string(t.result.cases - t.result.passed) + " of " + std::to_string(t.result.cases) +
                  " standard cases fail (first: " + failed +
                  "); a kernel that is not verified is not packaged");
    }
    nlohmann::json predicted;
    for (const router::TrackRow& r : d.rows)
      if (r.gate.feasible) predicted[r.gate.track] = 100 * r.prediction.score;
    nlohmann::json report{{"operator", c.contract.name},
                          {"contract_hash", c.hash},
                          {"track", track_name},
                          {"knobs", t.knobs},
                          {"routing",
                           {{"chosen", d.chosen},
                            {"deciding", d.deciding},
                            {"predicted", predicted},
                            {"forced", !o->track.empty()}}},
                          {"machine",
                           {{"cpu", m.cpu_model},
                            {"bandwidth_gbs", ctx.peaks.bytes_per_s / 1e9},
                            {"fma_gflops", ctx.peaks.flops_per_s / 1e9},
                            {"threads", threads}}},
                          {"set", "standard"},
                          {"score", t.result.score},
                          {"pass_rate", t.result.cases ? double(t.result.passed) / t.result.cases : 0.0},
                          {"baseline", o->no_baseline ? "none" : "libtorch"},
                          {"cases", t.op["cases"]}};
    const std::string op_name = c.contract.name;
    const deliver::Package pkg = deliver::write_package({std::move(c), o->file, t.library, report}, o->out);
    if (o->json) {
      std::printf("%s\n", nlohmann::json{{"package", pkg.dir.string()},
                                         {"library", pkg.library.string()},
                                         {"report", pkg.report_md.string()},
                                         {"track", track_name},
                                         {"score", t.result.score}}
                              .dump(2)
                              .c_str());
    } else {
      std::printf("%s: %d/%d standard cases pass on %s, score %.1f, %.2fx the libtorch baseline\n",
                  op_name.c_str(), t.result.passed, t.result.cases, track_name.c_str(), t.result.score,
                  t.op["speedup_over_baseline"].get<double>());
      std::printf("package: %s\n  library  %s\n  report   %s\n", pkg.dir.c_str(), pkg.library.c_str(),
                  pkg.report_md.c_str());
    }
  });
}

}  // namespace cake::cli
