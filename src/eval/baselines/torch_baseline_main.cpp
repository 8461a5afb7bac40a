// cake-torch-baseline: times the libtorch baseline (T_base, DESIGN §6) on one CAKE-Bench case with the
// harness's timing loop, checks its result once against the reference interpreter, and prints one JSON
// object.
//   cake-torch-baseline --contract bench/ops/softmax.yaml --set standard --case 3 --threads 2 --json
//   cake-torch-baseline --contract bench/ops/softmax.yaml --set hidden --all     (one JSON line per case)
//   cake-torch-baseline --contract bench/ops/matmul.yaml --sizes M=1024,N=1024,K=1024 --dtype f32 --threads 2
// Inputs are converted once to torch tensors in the case dtype and reused by every call; outputs are
// preallocated (NaN-filled) and written by out= variants or copy_ (torch_ops::allocation says which).
// Errors (unknown op, a dtype libtorch has no CPU kernel for, bad arguments) exit 3 with {"error": "..."}.
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/core/InferenceMode.h>
#include <dlfcn.h>
#include <sched.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/dtype.h"
#include "core/error.h"
#include "eval/baselines/torch_ops.h"
#include "eval/precision.h"
#include "eval/timing.h"
#include "reference/reference.h"

namespace {

using json = nlohmann::json;
namespace to = cake::torch_ops;

constexpr int kExitError = 3;

// What is known of the run so far (op, case, dtype): added to an error's JSON.
json g_context = json::object();

struct Failure {
  std::string msg;
};

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

// The kernel set ATen dispatches to ("DEFAULT", "AVX2", "AVX512"; ATEN_CPU_CAPABILITY lowers it):
// libtorch 1.13 exports no getter, but at::show_config() reports it on its "CPU capability usage:" line.
std::string cpu_capability() {
  const std::string cfg = at::show_config();
  const std::string key = "CPU capability usage:";
  const auto p = cfg.find(key);
  if (p == std::string::npos) return "unknown";
  std::string v = cfg.substr(p + key.size(), cfg.find('\n', p) - p - key.size());
  v.erase(0, v.find_first_not_of(' '));
  return v;
}

// libtorch's matmul runs in the system BLAS (OpenBLAS here), whose threads at::set_num_threads does not set.
json set_blas_threads(int threads) {
  json b = json::object();
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  using NameFn = char* (*)();
  if (auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
  if (auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")))
    b["threads"] = get();
  if (auto name = reinterpret_cast<NameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
    b["corename"] = name();
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  b["OPENBLAS_CORETYPE"] = core ? json(core) : json(nullptr);
  return b;
}

std::map<std::string, int64_t> parse_sizes(const std::string& s) {
  std::map<std::string, int64_t> m;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw Failure{"--sizes: expected NAME=VALUE, got '" + item + "'"};
    try {
      size_t used = 0;
      const std::string v = item.substr(eq + 1);
      m[item.substr(0, eq)] = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
    } catch (const std::exception&) {
      throw Failure{"--sizes: '" + item + "' has no integer value"};
    }
  }
  return m;
}

// The first line of a torch error (its messages carry a C++ backtrace after it).
std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

struct Args {
  std::string contract, set = "standard", sizes, dtype;
  int case_index = 0, threads = 1, warmup = 2, min_reps = 5;
  double min_seconds = 0.25;
  bool json_line = false, no_check = false, all = false;
};

cake::CheckedContract load(const Args& a) {
  cake::CheckedContract c;
  try {
    c = cake::load_and_check(a.contract);
  } catch (const cake::ContractError& e) {
    throw Failure{"contract rejected: " + e.loc().str() + ": " + e.message()};
  }
  if (!to::has_torch_op(c.contract.name))
    throw Failure{"unknown op '" + c.contract.name + "': no libtorch baseline"};
  return c;
}

cake::cases::Set parse_set(const std::string& s) {
  if (s == "standard") return cake::cases::Set::Standard;
  if (s == "hidden") return cake::cases::Set::Hidden;
  throw Failure{"--set: standard or hidden, not '" + s + "'"};
}

// The case the arguments name: --sizes (with --dtype) or --set and --case.
cake::cases::Case chosen_case(const cake::CheckedContract& c, const Args& a) {
  const std::string& op = c.contract.name;
  cake::cases::Case k;
  if (!a.sizes.empty()) {
    const auto dt =
        a.dtype.empty() ? std::optional<cake::DType>(c.contract.dtypes.at(0)) : cake::parse_dtype(a.dtype);
    if (!dt) throw Failure{"unknown dtype '" + a.dtype + "'"};
    if (!c.contract.has_dtype(*dt))
      throw Failure{"unsupported dtype: " + op + " does not list " + std::string(cake::dtype_name(*dt))};
    k = cake::cases::make_case(c, parse_sizes(a.sizes), *dt);
  } else {
    if (!a.dtype.empty()) throw Failure{"--dtype goes with --sizes (a set case has its own dtype)"};
    const auto cs = cake::cases::make_cases(c, parse_set(a.set));
    if (a.case_index < 0 || a.case_index >= static_cast<int>(cs.size()))
      throw Failure{"--case " + std::to_string(a.case_index) + ": the " + a.set + " set has " +
                    std::to_string(cs.size()) + " cases"};
    k = cs[a.case_index];
  }
  return k;
}

// Times and checks one case; `custom` says the case came from --sizes rather than a set.
json run_case(const cake::CheckedContract& c, const cake::cases::Case& k, const Args& a, bool custom) {
  const std::string& op = c.contract.name;
  const std::string dtype_name(cake::dtype_name(k.dtype));
  g_context = {
      {"op", op}, {"case", custom ? "custom" : k.id()}, {"shape", k.describe()}, {"dtype", dtype_name}};

  const int threads = a.threads > 0 ? a.threads : usable_cores();
  at::set_num_threads(threads);
  json blas = set_blas_threads(threads);

  c10::InferenceMode inference;
  const to::TorchCtx ctx = to::make_ctx(c, k);
  std::vector<torch::Tensor> tin;
  for (const auto& t : cake::cases::make_inputs(c, k)) tin.push_back(to::to_torch(t, to::Conv::native));

  // One functional call: learns torch's output shapes, and whether libtorch has this dtype's CPU kernels.
  std::vector<torch::Tensor> first;
  try {
    first = to::torch_op(op, tin, ctx);
  } catch (const c10::Error& e) {
    const std::string m = first_line(e.what_without_backtrace());
    if (m.find("not implemented for") != std::string::npos)
      throw Failure{"unsupported dtype: libtorch " TORCH_VERSION " has no CPU " + dtype_name +
                    " kernel for " + op + " (" + m + ")"};
    throw Failure{"libtorch failed on " + op + " " + k.describe() + ": " + m};
  }

  const std::vector<int> outs = c.output_ids();
  if (first.size() != outs.size())
    throw Failure{op + ": torch gives " + std::to_string(first.size()) + " outputs"};
  std::vector<torch::Tensor> tout(outs.size());
  std::vector<cake::DType> out_dt(outs.size());
  std::vector<cake::Shape> out_shape(outs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    out_dt[o] = c.tensors[outs[o]].dtype_for(k.dtype);
    out_shape[o] = cake::tensor_shape(c, outs[o], k.sizes);
    if (first[o].numel() != cake::shape_numel(out_shape[o]))
      throw Failure{op + " output " + c.tensors[outs[o]].name + ": torch gives " +
                    std::to_string(first[o].numel()) + " elements, the contract " +
                    cake::shape_str(out_shape[o])};
    tout[o] = torch::empty(first[o].sizes(), torch::TensorOptions().dtype(to::torch_dtype(out_dt[o])));
    if (cake::is_float(out_dt[o]))
      tout[o].fill_(
          std::numeric_limits<double>::quiet_NaN());  // the harness's pre-fill; also the first touch
    else
      tout[o].zero_();
  }
  first.clear();

  // The candidate's rotation (cake-runner): a memory-bound case reads its inputs from DRAM in both, not
  // from a cache the baseline alone kept warm.
  double in_bytes = 0;
  for (const torch::Tensor& t : tin) in_bytes += static_cast<double>(t.nbytes());
  const size_t n_sets =
      cake::eval::input_sets(cake::cases::case_flops(c, k), cake::cases::case_bytes(c, k), in_bytes);
  std::vector<std::vector<torch::Tensor>> sets{tin};
  for (size_t i = 1; i < n_sets; ++i) {
    cake::cases::Case kp = k;
    kp.seed = cake::eval::input_set_seed(k.seed, i);
    std::vector<torch::Tensor> set;
    for (const auto& t : cake::cases::make_inputs(c, kp)) set.push_back(to::to_torch(t, to::Conv::native));
    sets.push_back(std::move(set));
  }
  cake::eval::TimingOptions topt;
  topt.warmup = a.warmup;
  topt.min_seconds = a.min_seconds;
  topt.min_reps = a.min_reps;
  const cake::eval::Timing tm = cake::eval::time_calls(
      [&](int rep) { to::torch_op_into(op, sets[cake::eval::input_set_of(rep, n_sets)], ctx, tout); }, topt);
  if (n_sets > 1)
    to::torch_op_into(op, tin, ctx, tout);  // the outputs of the case's own inputs, checked below

  json gate = nullptr;
  if (!a.no_check) {
    const std::vector<cake::Tensor> ref = cake::reference::cached_outputs(c, k);
    bool pass = true;
    double mere = 0, mare = 0;
    json per = json::object();
    for (size_t o = 0; o < outs.size(); ++o) {
      const std::string& name = c.tensors[outs[o]].name;
      cake::Tensor got = to::from_torch(tout[o], out_dt[o], out_shape[o], op + " output " + name);
      cake::eval::GateResult g = cake::eval::precision_gate(got, ref.at(o));
      pass = pass && g.pass;
      mere = std::max(mere, g.mere);
      mare = std::max(mare, g.mare);
      per[name] = {{"pass", g.pass}, {"mere", g.mere}, {"mare", g.mare}, {"reason", g.reason}};
    }
    gate = {{"pass", pass}, {"mere", mere}, {"mare", mare}, {"outputs", per}};
  }

  const char* cap_env = std::getenv("ATEN_CPU_CAPABILITY");
  json r = {{"op", op},
            {"case", custom ? "custom" : k.id()},
            {"shape", k.describe()},
            {"dtype", dtype_name},
            {"threads", threads},
            {"torch_version", TORCH_VERSION},
            {"cpu_capability", cpu_capability()},
            {"ATEN_CPU_CAPABILITY", cap_env ? json(cap_env) : json(nullptr)},
            {"blas", blas},
            {"allocation", to::allocation(op)},
            {"gate", gate}};
  const json timing = tm.to_json();
  for (const auto& [key, v] : timing.items()) r[key] = v;
  r["timing_input_sets"] = n_sets;
  return r;
}

// The error object for a failure, with what is known of the run.
json error_json(const std::string& err) {
  json e = g_context;
  e["error"] = err;
  return e;
}

// Runs `f`, turning every failure into its error message; returns "" when `f` succeeded.
template <class F>
std::string catch_failure(F&& f) {
  try {
    f();
    return "";
  } catch (const Failure& x) {
    return x.msg;
  } catch (const c10::Error& x) {
    return "libtorch: " + first_line(x.what_without_backtrace());
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

// --all: every case of the set in this one process (libtorch loads once), one JSON line per case as it
// finishes; a case that fails prints its error line and the next case still runs.
int run_all(const Args& a) {
  cake::CheckedContract c;
  std::vector<cake::cases::Case> cs;
  std::string err = catch_failure([&] {
    c = load(a);
    cs = cake::cases::make_cases(c, parse_set(a.set));
  });
  if (!err.empty()) {
    std::cout << error_json(err).dump() << std::endl;
    return kExitError;
  }
  bool all_ok = true;
  for (const cake::cases::Case& k : cs) {
    g_context = {{"op", c.contract.name}, {"case", k.id()}, {"index", k.index}};
    json r;
    err = catch_failure([&] { r = run_case(c, k, a, false); });
    if (!err.empty()) {
      all_ok = false;
      r = error_json(err);
    }
    r["index"] = k.index;
    std::cout << r.dump() << std::endl;
  }
  return all_ok ? 0 : kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"cake-torch-baseline: time the libtorch baseline of one CAKE-Bench case"};
  app.add_option("--contract", a.contract, "operator contract (bench/ops/<op>.yaml)")->required();
  app.add_option("--set", a.set, "case set: standard | hidden");
  app.add_option("--case", a.case_index, "case index in the set");
  app.add_option("--sizes", a.sizes, "a case outside the sets: every free size, e.g. N=64,D=127");
  app.add_option("--dtype", a.dtype, "with --sizes: the operator dtype (default: the contract's first)");
  app.add_option("--threads", a.threads, "intra-op threads for torch and its BLAS (0: all usable cores)");
  app.add_option("--warmup", a.warmup, "untimed calls first");
  app.add_option("--min-seconds", a.min_seconds, "timed time to reach");
  app.add_option("--min-reps", a.min_reps, "timed repetitions to reach");
  app.add_flag("--json", a.json_line, "one JSON line (default: indented JSON)");
  app.add_flag("--no-check", a.no_check, "skip the check against the reference (gate: null)");
  app.add_flag("--all", a.all, "every case of --set in one process, one JSON line per case");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cout << json{{"error", std::string("arguments: ") + e.what()}}.dump() << "\n";
    return kExitError;
  }
  if (a.all) return run_all(a);
  json r;
  const std::string err = catch_failure([&] {
    const cake::CheckedContract c = load(a);
    r = run_case(c, chosen_case(c, a), a, !a.sizes.empty());
  });
  if (!err.empty()) {
    std::cout << error_json(err).dump() << "\n";
    return kExitError;
  }
  std::cout << (a.json_line ? r.dump() : r.dump(2)) << "\n";
  return 0;
}
