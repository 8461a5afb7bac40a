// Content hashing for cache keys (reference outputs, builds): a 64-bit FNV-1a with a final
// avalanche mix, stable across runs, processes and machines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cake {

class Hasher {
 public:
  Hasher& add(std::string_view bytes);
  Hasher& add(const void* data, size_t n);
  Hasher& add_u64(uint64_t v);
  uint64_t digest() const;
  std::string hex() const;  // 16 lowercase hex digits

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

inline std::string hash_hex(std::string_view bytes) { return Hasher().add(bytes).hex(); }

}  // namespace cake
