// FNV-1a 64 over bytes, finished with the splitmix64 mixer.
#include "core/hash.h"

#include <cstdio>

namespace cake {

Hasher& Hasher::add(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h_ ^= p[i];
    h_ *= 0x100000001b3ull;
  }
  return *this;
}

Hasher& Hasher::add(std::string_view bytes) {
  add_u64(bytes.size());  // length prefix: ("ab","c") and ("a","bc") differ
  return add(bytes.data(), bytes.size());
}

Hasher& Hasher::add_u64(uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return add(b, 8);
}

uint64_t Hasher::digest() const {
  uint64_t z = h_ + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string Hasher::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest()));
  return buf;
}

}  // namespace cake
