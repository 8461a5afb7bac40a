// The exit code chosen by a sub-command's callback.
#include "cli/commands.h"

namespace cake::cli {
namespace {
int g_exit_code = 0;
}
int exit_code() { return g_exit_code; }
void set_exit_code(int code) { g_exit_code = code; }
}  // namespace cake::cli
