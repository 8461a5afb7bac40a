// compose_regimes, best_split and best_dtype_split (regimes.h): the composite's dispatcher source and
// recipe, and the split searches over measured cases.
#include "tracks/regimes/regimes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/error.h"
#include "tracks/common/host_code.h"

namespace cake::tracks {

namespace {

std::string dtype_list(const std::vector<DType>& ds) {
  std::string out;
  for (DType d : ds) out += (out.empty() ? "" : ",") + std::string(dtype_name(d));
  return out;
}

// The call's value of size `name` as a C expression over the ABI's tensors ("in[1].shape[2]"), from the
// first input, else output, with a dimension that is that size alone; empty when none is.
std::string size_in_call(const CheckedContract& c, const std::string& name) {
  const auto find = [&](const std::vector<TensorDecl>& ts, const char* side) -> std::string {
    for (size_t t = 0; t < ts.size(); ++t) {
      for (size_t d = 0; d < ts[t].dims.size(); ++d) {
        const te::Expr& e = *ts[t].dims[d];
        if (e.kind == te::ExprKind::Size && e.name == name)
          return fmt::format("{}[{}].shape[{}]", side, t, d);
      }
    }
    return "";
  };
  const std::string in = find(c.contract.inputs, "in");
  return in.empty() ? find(c.contract.outputs, "out") : in;
}

// The dispatcher: both variants' kernel.so embedded with .incbin, loaded through memfd on first use.
std::string dispatcher_source(const CheckedContract& c, const Artifact& small, const Artifact& large,
                              const Route& r) {
  std::string what, first;
  // Tensor shapes and dtypes are read only once the counts are right.
  const std::string counts =
      fmt::format("n_in == {} && n_out == {}", c.contract.inputs.size(), c.contract.outputs.size());
  if (!r.size.empty()) {
    const std::string at = size_in_call(c, r.size);
    if (at.empty()) throw Error("regimes: size " + r.size + " is not a dimension of any input or output");
    what = fmt::format("cases with {} below {}", r.size, r.below_size);
    first = fmt::format("{} && {} < INT64_C({})", counts, at, r.below_size);
  } else if (r.first_dtypes.empty()) {
    what = fmt::format("cases with fewer than {} bytes of inputs and outputs", r.below_io_bytes);
    first = fmt::format("io_bytes(in, n_in) + io_bytes(out, n_out) < INT64_C({})", r.below_io_bytes);
  } else {
    what = "cases of operator dtype " + dtype_list(r.first_dtypes);
    const std::string op = op_dtype_expr(c);
    first = counts + " && (";
    for (size_t i = 0; i < r.first_dtypes.size(); ++i)
      first += fmt::format("{}{} == {}", i ? " || " : "", op, static_cast<int>(r.first_dtypes[i]));
    first += ")";
  }
  return fmt::format(
      R"(// CAKE regime dispatch for {op}: {what}
// run variant `small` ({st} {sk}), the others variant `large` ({lt} {lk}).
// Each variant's kernel.so is embedded below and loaded from memory on first use.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "cake_kernel_abi.h"

#define CAKE_EMBED(name, file)                                                                   \
  asm(".section .rodata\n.balign 64\n.globl " #name "\n.hidden " #name "\n" #name ":\n.incbin \"" file \
      "\"\n.globl " #name "_end\n.hidden " #name "_end\n" #name "_end:\n.previous\n");           \
  extern "C" const unsigned char name[], name##_end[];

CAKE_EMBED(cake_small_so, "small/kernel.so")
CAKE_EMBED(cake_large_so, "large/kernel.so")

namespace {{

cake_run_fn load(const unsigned char* begin, const unsigned char* end, const char* name) {{
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  for (const unsigned char* p = begin; p < end;) {{
    const ssize_t n = write(fd, p, size_t(end - p));
    if (n <= 0) {{
      close(fd);
      return nullptr;
    }}
    p += n;
  }}
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  // The descriptor stays open: closed, the next variant's memfd would get the same number and so the same
  // path, and dlopen would hand back the library already loaded under that name.
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  return h ? reinterpret_cast<cake_run_fn>(dlsym(h, "cake_run")) : nullptr;
}}

int64_t io_bytes(const cake_tensor* t, int n) {{
  static const int64_t size[] = {{4, 2, 2, 4, 8, 1, 1}};
  int64_t bytes = 0;
  for (int i = 0; i < n; ++i) {{
    int64_t e = t[i].dtype >= 0 && t[i].dtype < 7 ? size[t[i].dtype] : 1;
    for (int d = 0; d < t[i].rank && d < CAKE_MAX_RANK; ++d) e *= t[i].shape[d];
    bytes += e;
  }}
  return bytes;
}}

}}  // namespace

extern "C" __attribute__((visibility("default")))
int cake_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out, const double* params, int n_params) {{
  if (n_in < 0 || n_out < 0 || (n_in > 0 && !in) || (n_out > 0 && !out)) return CAKE_ERR_ARGS;
  static const cake_run_fn small = load(cake_small_so, cake_small_so_end, "cake-small");
  static const cake_run_fn large = load(cake_large_so, cake_large_so_end, "cake-large");
  const cake_run_fn fn = {first} ? small : large;
  if (!fn) return CAKE_ERR_DEVICE;  // a variant did not load
  return fn(in, n_in, out, n_out, params, n_params);
}}
)",
      fmt::arg("op", small.op), fmt::arg("what", what), fmt::arg("first", first), fmt::arg("st", small.track),
      fmt::arg("sk", small.knobs.str()), fmt::arg("lt", large.track), fmt::arg("lk", large.knobs.str()));
}

void add_variant(Artifact& out, const Artifact& v, const std::string& dir) {
  for (const SourceFile& f : v.files) out.files.push_back({dir + "/" + f.name, f.text});
  for (const BuildStep& s : v.steps) {
    if (!s.dir.empty()) throw Error("regimes: a variant's step runs in its own folder (nested composite?)");
    out.steps.push_back({s.argv, dir + "-" + s.what, dir});
  }
  if (v.library != "kernel.so") out.steps.push_back({{"cp", v.library, "kernel.so"}, dir + "-copy", dir});
}

}  // namespace

Artifact compose_regimes(const CheckedContract& c, const Artifact& small, const Artifact& large,
                         const Route& r) {
  if (small.op != large.op || small.contract_hash != large.contract_hash)
    throw Error("regimes: the two variants are of different operators (" + small.op + ", " + large.op + ")");
  if (small.track == kRegimesTrack || large.track == kRegimesTrack)
    throw Error("regimes: a variant is itself a composite");
  Artifact a;
  a.track = kRegimesTrack;
  a.knobs.set("small", nlohmann::json{{"track", small.track}, {"knobs", small.knobs.to_json()}}.dump());
  a.knobs.set("large", nlohmann::json{{"track", large.track}, {"knobs", large.knobs.to_json()}}.dump());
  a.knobs.set("below_io_bytes", r.below_io_bytes);
  if (!r.first_dtypes.empty()) a.knobs.set("dtypes", dtype_list(r.first_dtypes));
  if (!r.size.empty()) {
    a.knobs.set("size", r.size);
    a.knobs.set("below_size", r.below_size);
  }
  a.op = small.op;
  a.contract_hash = small.contract_hash;
  a.main_file = "dispatch.cpp";
  add_variant(a, small, "small");
  add_variant(a, large, "large");
  a.files.push_back({"dispatch.cpp", dispatcher_source(c, small, large, r)});
  a.files.push_back(exports_map());
  for (SourceFile& f : prelude_files()) a.files.push_back(std::move(f));
  a.steps.push_back({{"g++", "-std=c++17", "-O2", "-fPIC", "-shared", "-I.", "dispatch.cpp", "-o",
                      "kernel.so", "-Wl,--version-script=exports.map", "-ldl"},
                     "link"});
  return a;
}

RegimesParts regimes_parts(const Knobs& k) {
  try {
    const nlohmann::json small = nlohmann::json::parse(k.choice("small"));
    const nlohmann::json large = nlohmann::json::parse(k.choice("large"));
    RegimesParts p{small.at("track"), large.at("track"), small.at("knobs"), large.at("knobs"),
                   Route::by_io_bytes(k.integer("below_io_bytes"))};
    if (k.has("size")) {
      p.route.size = k.choice("size");
      p.route.below_size = k.integer("below_size");
    }
    if (k.has("dtypes")) {
      std::stringstream in(k.choice("dtypes"));
      for (std::string name; std::getline(in, name, ',');) {
        const std::optional<DType> d = parse_dtype(name);
        if (!d) throw Error("regimes: unknown dtype '" + name + "' in the composite's knobs");
        p.route.first_dtypes.push_back(*d);
      }
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("regimes: malformed composite knobs: ") + e.what());
  }
}

namespace {
// A judged case's efficiency as the judge's mean counts it (eval::efficiency): T_HW / T_cand, at most 1.
double case_efficiency(const nlohmann::json& k) {
  const double t = k.value("t_cand_s", 0.0);
  return t > 0 ? std::min(1.0, k.value("t_floor_s", 0.0) / t) : 0.0;
}
}  // namespace

std::vector<std::string> routable_sizes(const CheckedContract& c) {
  std::vector<std::string> out;
  for (const SizeInfo& z : c.sizes)
    if (z.free && !size_in_call(c, z.name).empty()) out.push_back(z.name);
  return out;
}

std::optional<RegimeSplit> best_split(const nlohmann::json& a, const nlohmann::json& b,
                                      const std::vector<std::string>& sizes) {
  struct Point {
    double key, ea, eb;
  };
  if (!a.is_array() || !b.is_array() || a.size() != b.size() || a.empty()) return std::nullopt;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].value("verdict", "") != "pass" || b[i].value("verdict", "") != "pass") return std::nullopt;
  std::optional<RegimeSplit> best;
  // By the I/O bytes (size ""), then by each size every case gives.
  std::vector<std::string> keys{""};
  for (const std::string& z : sizes) {
    if (std::all_of(a.begin(), a.end(), [&](const nlohmann::json& k) {
          return k.contains("sizes") && k["sizes"].contains(z) && k["sizes"][z].is_number();
        }))
      keys.push_back(z);
  }
  for (const std::string& z : keys) {
    std::vector<Point> pts;
    for (size_t i = 0; i < a.size(); ++i) {
      const double key = z.empty() ? a[i].value("io_bytes", 0.0) : a[i]["sizes"][z].get<double>();
      pts.push_back({key, case_efficiency(a[i]), case_efficiency(b[i])});
    }
    std::sort(pts.begin(), pts.end(), [](const Point& x, const Point& y) { return x.key < y.key; });
    const double n = double(pts.size());
    // Cut before point i (1 <= i < n) where the key changes: [0, i) small, [i, n) large.
    double sum_a_below = 0, sum_b_below = 0, sum_a = 0, sum_b = 0;
    for (const Point& p : pts) sum_a += p.ea, sum_b += p.eb;
    for (size_t i = 1; i < pts.size(); ++i) {
      sum_a_below += pts[i - 1].ea;
      sum_b_below += pts[i - 1].eb;
      if (pts[i].key == pts[i - 1].key) continue;
      const int64_t cut = int64_t(std::ceil(std::sqrt(std::max(pts[i - 1].key, 1.0) * pts[i].key)));
      const double a_small = (sum_a_below + (sum_b - sum_b_below)) / n;
      const double b_small = (sum_b_below + (sum_a - sum_a_below)) / n;
      for (const bool as : {true, false}) {
        const double e = as ? a_small : b_small;
        if (!best || e > best->efficiency) best = RegimeSplit{as, z, cut, e, int(i)};
      }
    }
  }
  return best;
}

std::optional<DtypeSplit> best_dtype_split(const nlohmann::json& a, const nlohmann::json& b) {
  if (!a.is_array() || !b.is_array() || a.size() != b.size() || a.empty()) return std::nullopt;
  struct Sums {
    double a = 0, b = 0;
    int n = 0;
  };
  std::map<DType, Sums> by;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].value("verdict", "") != "pass" || b[i].value("verdict", "") != "pass") return std::nullopt;
    const std::optional<DType> d = parse_dtype(a[i].value("dtype", ""));
    if (!d || b[i].value("dtype", "") != a[i].value("dtype", "")) return std::nullopt;
    Sums& s = by[*d];
    s.a += case_efficiency(a[i]), s.b += case_efficiency(b[i]), ++s.n;
  }
  DtypeSplit out;
  double sum = 0;
  for (const auto& [d, s] : by) {
    sum += std::max(s.a, s.b);
    if (s.a > s.b) out.a_dtypes.push_back(d), out.a_cases += s.n;
  }
  if (out.a_dtypes.empty() || out.a_dtypes.size() == by.size()) return std::nullopt;
  out.efficiency = sum / double(a.size());
  return out;
}

}  // namespace cake::tracks
