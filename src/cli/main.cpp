// The `cake` command (DESIGN §10): one sub-command per file, each registered here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"cake — turns an operator contract into a verified, fast compute kernel"};
  app.require_subcommand(1);
  app.fallthrough();  // set before the sub-commands, which inherit it: --store may follow a sub-command
  app.set_version_flag("--version", "cake 0.1.0");
  cake::cli::add_check_command(app);
  cake::cli::add_doctor_command(app);
  cake::cli::add_lower_command(app);
  cake::cli::add_bench_command(app);
  cake::cli::add_route_command(app);
  cake::cli::add_router_command(app);
  cake::cli::add_generate_commands(app);
  cake::cli::add_eval_command(app);
  app.add_option("--store", cake::cli::store_path_option(),
                 "the SQLite store (default ~/.cache/cake/cake.db)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const cake::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cake: internal error: %s\n", e.what());
    return 3;
  }
  return cake::cli::exit_code();
}
