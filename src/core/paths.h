// Where CAKE keeps its files: the cache root (~/.cache/cake, or $CAKE_CACHE_DIR, or
// $XDG_CACHE_HOME/cake) and atomic file writes for everything cached there.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cake {

std::filesystem::path cache_dir();  // created on first use
std::filesystem::path cache_path(std::string_view sub);  // cache_dir()/sub, parent created

// Writes via a temporary file and rename, so readers never see a partial file.
void write_file_atomic(const std::filesystem::path& p, std::string_view bytes);
std::optional<std::string> read_file(const std::filesystem::path& p);

}  // namespace cake
