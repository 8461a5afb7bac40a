// On-disk cache of reference outputs, keyed by the contract's content hash and the case (sizes,
// dtype, seed), so a repeated bench or test spends almost nothing on ground truth.
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/hash.h"
#include "core/paths.h"
#include "reference/reference.h"

namespace cake::reference {
namespace {

constexpr char kMagic[8] = {'C', 'A', 'K', 'E', 'R', 'E', 'F', '1'};
// Bump whenever the interpreter's or the input generator's results change: old entries then miss.
constexpr char kSemanticsVersion[] = "reference-v2 inputs-v2";

std::string case_key(const cases::Case& k) {
  Hasher h;
  h.add(kSemanticsVersion).add(dtype_name(k.dtype)).add_u64(k.seed);
  for (int64_t s : k.sizes) h.add_u64(static_cast<uint64_t>(s));
  for (double p : k.params) h.add(&p, sizeof p);
  return std::string(cases::set_name(k.set)) + "-" + std::to_string(k.index) + "-" + h.hex();
}

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
bool get(const std::string& s, size_t& at, T& v) {
  if (at + sizeof v > s.size()) return false;
  std::memcpy(&v, s.data() + at, sizeof v);
  at += sizeof v;
  return true;
}

std::string encode(const std::vector<Tensor>& ts) {
  std::string s(kMagic, sizeof kMagic);
  put<uint32_t>(s, static_cast<uint32_t>(ts.size()));
  for (const auto& t : ts) {
    put<int32_t>(s, static_cast<int32_t>(t.dtype()));
    put<int32_t>(s, t.rank());
    for (int64_t d : t.shape()) put<int64_t>(s, d);
    s.append(static_cast<const char*>(t.data()), t.nbytes());
  }
  return s;
}

// Decodes and validates against the expected shapes and dtypes; nullopt when anything is off.
std::optional<std::vector<Tensor>> decode(const std::string& s, const std::vector<Tensor>& like) {
  if (s.size() < sizeof kMagic || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  size_t at = sizeof kMagic;
  uint32_t n = 0;
  if (!get(s, at, n) || n != like.size()) return std::nullopt;
  std::vector<Tensor> out;
  for (uint32_t i = 0; i < n; ++i) {
    int32_t dt = 0, rank = 0;
    if (!get(s, at, dt) || !get(s, at, rank) || rank < 0 || rank > 8) return std::nullopt;
    Shape shape(static_cast<size_t>(rank));
    for (auto& d : shape)
      if (!get(s, at, d)) return std::nullopt;
    if (dt != static_cast<int32_t>(like[i].dtype()) || shape != like[i].shape()) return std::nullopt;
    Tensor t(like[i].dtype(), shape);
    if (at + t.nbytes() > s.size()) return std::nullopt;
    std::memcpy(t.data(), s.data() + at, t.nbytes());
    at += t.nbytes();
    out.push_back(std::move(t));
  }
  if (at != s.size()) return std::nullopt;
  return out;
}

}  // namespace

std::vector<Tensor> cached_outputs(const CheckedContract& c, const cases::Case& k) {
  auto path = cache_path("reference/" + c.contract.name + "-" + c.hash + "/" + case_key(k) + ".bin");
  std::vector<Tensor> like = cases::make_outputs(c, k);
  if (auto bytes = read_file(path))
    if (auto hit = decode(*bytes, like)) return std::move(*hit);
  std::vector<Tensor> out = run(c, k, cases::make_inputs(c, k));
  try {
    write_file_atomic(path, encode(out));
  } catch (const Error&) {
    // A read-only or full cache only costs time.
  }
  return out;
}

}  // namespace cake::reference
