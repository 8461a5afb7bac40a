// Registration of the `cake` sub-commands; each lives in its own cmd_<name>.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store/store.h"

namespace cake::cli {

void add_check_command(CLI::App& app);
void add_doctor_command(CLI::App& app);
void add_lower_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_route_command(CLI::App& app);
void add_router_command(CLI::App& app);
void add_generate_commands(CLI::App& app);  // generate, run, deliver
void add_eval_command(CLI::App& app);

// The process exit code a command's callback chose (0 by default).
int exit_code();
void set_exit_code(int code);

// `--store FILE` (any sub-command): the SQLite store; empty means ~/.cache/cake/cake.db.
std::string& store_path_option();
store::Store open_store();

}  // namespace cake::cli
