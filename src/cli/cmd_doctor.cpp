// `cake doctor [--json] [--refresh]`: the machine, its measured peaks (cached) and the admitted lanes.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "target/machine.h"

namespace cake::cli {

void add_doctor_command(CLI::App& app) {
  struct Options {
    bool json = false;
    bool refresh = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("doctor", "Machine, lanes and measured peaks (bandwidth, FP32 FMA)");
  cmd->add_flag("--json", opts->json, "Print one JSON document on stdout and nothing else there");
  cmd->add_flag("--refresh", opts->refresh, "Re-measure the peaks even when they are cached");
  cmd->callback([opts] {
    target::Progress progress;
    if (isatty(STDERR_FILENO)) {
      progress = [](std::string_view what) {
        std::fprintf(stderr, "cake doctor: measuring %.*s ...\n", int(what.size()), what.data());
        std::fflush(stderr);
      };
    }
    const target::MachineInfo info = target::describe_machine(opts->refresh, progress);
    if (opts->json)
      std::cout << target::to_json(info).dump(2) << "\n";
    else
      std::cout << target::to_text(info);
    std::cout.flush();
    set_exit_code(0);
  });
}

}  // namespace cake::cli
