// `cake eval <contract> --kernel LIB.so [--set standard|hidden] [--threads N] [--no-timing] [--no-baseline]
// [--json]` (DESIGN §10): judges a kernel someone else built — any shared object exporting cake_run with the
// C ABI of DESIGN §5, e.g. a delivered package's lib/cake_<op>_kernel.so — exactly as CAKE judges its own.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "skills/skill.h"

namespace cake::cli {

void add_eval_command(CLI::App& app) {
  struct Opts {
    std::string file, kernel, set = "standard";
    bool json = false, no_baseline = false, no_timing = false;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("eval", "judge a kernel built elsewhere (C ABI) on a case set");
  cmd->add_option("contract", o->file, "contract file (YAML)")->required();
  cmd->add_option("--kernel", o->kernel, "shared object exporting cake_run")->required();
  cmd->add_option("--set", o->set, "standard | hidden")
      ->capture_default_str()
      ->check(CLI::IsMember({"standard", "hidden"}));
  cmd->add_option("--threads", o->threads, "threads for the kernel and the baseline (0: all usable cores)");
  cmd->add_flag("--no-timing", o->no_timing, "verdicts and precision only");
  cmd->add_flag("--no-baseline", o->no_baseline, "time without libtorch (HAP then has no peer)");
  cmd->add_flag("--json", o->json, "print one JSON document on stdout");
  cmd->callback([o] {
    store::Store db = open_store();
    skills::Session s(db, target::describe_machine(), o->threads);
    s.baseline = !o->no_baseline;
    s.progress = isatty(2) && !o->json;
    s.begin_run("eval " + o->set, s.contract(o->file));
    const nlohmann::json r = skills::call(
        s, "evaluate",
        {{"contract", o->file}, {"library", o->kernel}, {"set", o->set}, {"timing", !o->no_timing}});
    if (o->json) {
      std::printf("%s\n", r.dump(2).c_str());
    } else if (!r["ok"].get<bool>()) {
      std::fprintf(stderr, "cake eval: %s\n", r["error"].get<std::string>().c_str());
    } else {
      for (const nlohmann::json& k : r["cases"]) {
        if (k["verdict"] != "pass") {
          std::printf("%-12s %-5s %s: %s\n", k["id"].get<std::string>().c_str(),
                      k["dtype"].get<std::string>().c_str(), k["verdict"].get<std::string>().c_str(),
                      k["detail"].get<std::string>().c_str());
        }
      }
      std::printf("%d of %d %s cases pass", r["passed"].get<int>(), r["total"].get<int>(), o->set.c_str());
      if (!o->no_timing) {
        std::printf("; score %.1f, %.2fx the baseline, mean efficiency %.3f", r["score"].get<double>(),
                    r["speedup_over_baseline"].get<double>(), r["mean_efficiency"].get<double>());
      }
      std::printf("\n");
    }
    set_exit_code(r["ok"].get<bool>() && r["passed"] == r["total"] ? 0 : 1);
  });
}

}  // namespace cake::cli
