// `cake lower <contract> --track T [-k name=value]... [--print] [--check] [--set standard|hidden] [--json]`:
// lowers a contract with one track and a knob assignment, builds it through the build service, and
// optionally checks the kernel against the reference on a case set. A developer's view of one track.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cli/commands.h"
#include "contract/contract.h"
#include "core/error.h"
#include "eval/conformance.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace cake::cli {

void add_lower_command(CLI::App& app) {
  struct Opts {
    std::string file, track = "simd", set = "standard";
    std::vector<std::string> knobs;
    bool print = false, check = false, json = false, list_knobs = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("lower", "lower a contract with one track, build it, optionally check it");
  cmd->add_option("contract", o->file, "contract file (YAML)")->required();
  cmd->add_option("--track,-t", o->track, "track name")->capture_default_str();
  cmd->add_option("--knob,-k", o->knobs, "knob assignment name=value (repeatable)");
  cmd->add_flag("--print", o->print, "print the generated main source file");
  cmd->add_flag("--knobs", o->list_knobs, "list the track's knob space for this contract and exit");
  cmd->add_flag("--check", o->check, "run the kernel on a case set and apply the precision gate");
  cmd->add_option("--set", o->set, "case set for --check: standard | hidden")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    nlohmann::json doc;
    auto fail = [&](const std::string& why, int code) {
      if (o->json) {
        doc["ok"] = false;
        doc["error"] = why;
        std::printf("%s\n", doc.dump(2).c_str());
      } else {
        std::fprintf(stderr, "cake lower: %s\n", why.c_str());
      }
      set_exit_code(code);
    };
    try {
      const CheckedContract c = load_and_check(o->file);
      const tracks::Track* t = tracks::find_track(o->track);
      if (!t) {
        std::string names;
        for (const tracks::Track* x : tracks::all_tracks())
          names += (names.empty() ? "" : ", ") + std::string(x->name());
        return fail("unknown track '" + o->track + "' (tracks: " + names + ")", 2);
      }
      const target::MachineInfo m = target::describe_machine();
      doc = {{"op", c.contract.name}, {"track", o->track}};
      const tracks::Feasibility f = t->feasible(c, m);
      if (!f.ok) return fail(o->track + " cannot lower " + c.contract.name + ": " + f.reason, 3);
      if (o->list_knobs) {
        const auto space = t->knobs(c, m).to_json();
        if (o->json) {
          std::printf("%s\n", space.dump(2).c_str());
        } else {
          for (const auto& k : space) {
            std::printf("%-20s default %-8s %s\n", k["name"].get<std::string>().c_str(),
                        k["default"].get<std::string>().c_str(), k["help"].get<std::string>().c_str());
          }
        }
        return;
      }
      tracks::Knobs req;
      for (const std::string& kv : o->knobs) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) return fail("knob '" + kv + "' is not name=value", 2);
        req.set(kv.substr(0, eq), kv.substr(eq + 1));
      }
      const tracks::Artifact a = t->lower(c, m, req);
      doc["knobs"] = a.knobs.to_json();
      if (o->print && !o->json) {
        for (const auto& file : a.files)
          if (file.name == a.main_file) std::printf("%s\n", file.text.c_str());
      }
      build::BuildOptions bo;
      const build::BuildResult r = build::build(a, bo);
      doc["build"] = {{"status", build::status_name(r.status)},
                      {"cache_hit", r.cache_hit},
                      {"seconds", r.seconds},
                      {"directory", r.directory.string()},
                      {"failure", r.failure}};
      doc["build"]["diagnostics"] = nlohmann::json::array();
      for (const build::Diagnostic& d : r.diagnostics) {
        doc["build"]["diagnostics"].push_back({{"file", d.file},
                                               {"line", d.line},
                                               {"col", d.col},
                                               {"severity", d.severity},
                                               {"message", d.message}});
      }
      if (!o->json) {
        std::fprintf(stderr, "build %s%s in %.2f s: %s\n", std::string(build::status_name(r.status)).c_str(),
                     r.cache_hit ? " (cached)" : "", r.seconds, r.directory.c_str());
        for (const build::Diagnostic& d : r.diagnostics) {
          if (d.severity != "note") {
            std::fprintf(stderr, "  %s:%d:%d: %s: %s\n", d.file.c_str(), d.line, d.col, d.severity.c_str(),
                         d.message.c_str());
          }
        }
      }
      if (!r.ok()) return fail("build failed: " + r.failure, 4);
      if (o->check) {
        const build::Kernel k(r.library);
        const cases::Set set = o->set == "hidden" ? cases::Set::Hidden : cases::Set::Standard;
        int passed = 0, total = 0;
        doc["cases"] = nlohmann::json::array();
        for (const eval::CaseOutcome& co : eval::check_kernel(k, c, set, [&](const eval::CaseOutcome& x) {
               if (!o->json) std::printf("%s\n", x.str().c_str());
             })) {
          ++total;
          passed += co.pass ? 1 : 0;
          doc["cases"].push_back(
              {{"id", co.id}, {"pass", co.pass}, {"describe", co.describe}, {"detail", co.str()}});
        }
        doc["passed"] = passed;
        doc["total"] = total;
        if (!o->json) {
          std::printf("%s/%s: %d of %d cases pass\n", c.contract.name.c_str(), o->track.c_str(), passed,
                      total);
        }
        set_exit_code(passed == total ? 0 : 1);
      }
      doc["ok"] = true;
      if (o->json) std::printf("%s\n", doc.dump(2).c_str());
    } catch (const ContractError& e) {
      fail(e.what(), 2);
    } catch (const Error& e) {
      fail(e.what(), 1);
    }
  });
}

}  // namespace cake::cli
