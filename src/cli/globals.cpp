// State shared by the sub-commands: the exit code a callback chose and the store the run uses.
#include "cli/commands.h"

namespace cake::cli {
namespace {
int g_exit_code = 0;
std::string g_store_path;
}  // namespace
int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}
std::string& store_path_option() {
  return g_store_path;
}
store::Store open_store() {
  return g_store_path.empty() ? store::Store() : store::Store(std::filesystem::path(g_store_path));
}
}  // namespace cake::cli
