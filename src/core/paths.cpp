// Cache directory resolution and atomic writes.
#include "core/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace cake {

namespace fs = std::filesystem;

fs::path cache_dir() {
  fs::path root;
  if (const char* d = std::getenv("CAKE_CACHE_DIR"); d && *d) {
    root = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    root = fs::path(x) / "cake";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    root = fs::path(h) / ".cache" / "cake";
  } else {
    root = fs::temp_directory_path() / "cake-cache";
  }
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw Error("cannot create cache directory " + root.string() + ": " + ec.message());
  return root;
}

fs::path cache_path(std::string_view sub) {
  fs::path p = cache_dir() / fs::path(sub);
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  return p;
}

void write_file_atomic(const fs::path& p, std::string_view bytes) {
  fs::path tmp = p;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write " + tmp.string());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error("short write to " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot rename into " + p.string());
  }
}

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace cake
