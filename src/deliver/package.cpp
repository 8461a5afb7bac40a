// write_package: generates every file of the operator package, copies the kernel and contract, and
// compiles the C wrapper library with the system C compiler (build::run_process, with a time limit).
#include "deliver/package.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "build/process.h"
#include "contract/printer.h"
#include "core/error.h"
#include "core/paths.h"
#include "deliver/codegen.h"
#include "deliver/report.h"
#include "tracks/common/host_code.h"

#ifndef CAKE_VERSION
#define CAKE_VERSION "0.0.0"
#endif

namespace cake::deliver {

namespace fs = std::filesystem;

namespace {

void check_kernel(const std::string& op, const fs::path& lib) {
  std::error_code ec;
  if (lib.empty()) throw Error("package " + op + ": no kernel library given");
  if (!fs::is_regular_file(lib, ec))
    throw Error("package " + op + ": the kernel library " + lib.string() +
                " does not exist or is not a file");
  void* h = dlopen(fs::absolute(lib).c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw Error("package " + op + ": the kernel library " + lib.string() +
                " does not load: " + (e ? e : "?"));
  }
  const bool has = dlsym(h, "cake_run") != nullptr;
  dlclose(h);
  if (!has)
    throw Error("package " + op + ": the kernel library " + lib.string() + " does not export cake_run");
}

void write(const fs::path& p, std::string_view text) {
  try {
    write_file_atomic(p, text);
  } catch (const std::exception& e) {
    throw Error("cannot write " + p.string() + ": " + e.what());
  }
}

void make_dirs(const fs::path& p) {
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec || !fs::is_directory(p))
    throw Error("cannot create the directory " + p.string() + ": " + ec.message());
}

// Copies via a temporary name and a rename, so a process that has the old file mapped keeps a valid one.
void copy_atomic(const fs::path& from, const fs::path& to) {
  const fs::path tmp = to.string() + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::permissions(tmp, fs::perms(0755), ec);
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot copy " + from.string() + " to " + to.string() + ": " + ec.message());
  }
}

std::string tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

void compile_wrapper(const std::string& op, const fs::path& dir, const PackageOptions& o) {
  std::string cc = o.cc;
  if (cc.empty()) {
    const char* env = std::getenv("CAKE_CC");
    cc = env && *env ? env : "cc";
  }
  const fs::path lib = dir / "lib" / ("libcake_" + op + ".so");
  const std::string tmp = "lib/.libcake_" + op + ".so.tmp" + std::to_string(::getpid());
  std::vector<std::string> argv{cc,
                                "-std=c11",
                                "-O2",
                                "-fPIC",
                                "-shared",
                                "-fvisibility=hidden",
                                "-Wall",
                                "-Wextra",
                                "-Wno-unused-function",
                                "-Iinclude",
                                "-Wl,-soname,libcake_" + op + ".so",
                                "-Wl,-rpath,$ORIGIN",
                                "-Wl,--no-undefined"};
  argv.insert(argv.end(), o.extra_cflags.begin(), o.extra_cflags.end());
  argv.insert(argv.end(), {"-o", tmp, "src/cake_" + op + "_wrapper.c", "-ldl", "-lpthread"});
  const fs::path log = dir / "src" / ("build-" + std::to_string(::getpid()) + ".log");
  std::error_code ec;
  fs::remove(log, ec);
  const build::ProcessResult r = build::run_process(argv, dir, log, o.timeout_s);
  const std::string out = read_file(log).value_or("");
  fs::remove(log, ec);
  std::string why;
  if (!r.started)
    why = "the C compiler '" + cc + "' could not be run (set CAKE_CC to a C compiler)";
  else if (r.timed_out)
    why = "the compile ran past " + std::to_string(static_cast<int>(o.timeout_s)) + " s";
  else if (r.signal)
    why = "the compiler was killed by signal " + std::to_string(r.signal);
  else if (r.exit_code != 0)
    why = "the compiler exited with " + std::to_string(r.exit_code);
  if (why.empty() && !fs::is_regular_file(dir / tmp, ec)) why = "the compiler produced no library";
  if (!why.empty()) {
    fs::remove(dir / tmp, ec);
    throw Error("package " + op + ": compiling the wrapper library failed: " + why + "\n" + tail(out, 8000));
  }
  fs::rename(dir / tmp, lib, ec);
  if (ec) throw Error("cannot move the wrapper library to " + lib.string() + ": " + ec.message());
}

}  // namespace

Package write_package(const PackageInput& in, const fs::path& out_dir, const PackageOptions& options) {
  const CheckedContract& c = in.contract;
  const std::string op = c.contract.name;
  if (!is_c_identifier(op))
    throw Error("package: the operator name '" + op + "' is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
  if (out_dir.empty()) throw Error("package " + op + ": no output directory given");
  check_kernel(op, in.kernel_library);

  nlohmann::json report = in.report.is_null() ? nlohmann::json::object() : in.report;
  if (!report.is_object())
    throw Error("package " + op + ": the report must be a JSON object, got " +
                std::string(report.type_name()));

  std::string contract_text;
  if (!in.contract_file.empty()) {
    const auto t = read_file(in.contract_file);
    if (!t) throw Error("package " + op + ": cannot read the contract file " + in.contract_file.string());
    contract_text = *t;
  } else {
    contract_text = c.contract.source.empty() ? print_contract(c.contract) : c.contract.source;
  }

  // Everything is generated before the disk is touched: a contract the generator cannot handle leaves
  // no half-written package behind.
  const std::string header = header_source(c), wrapper = wrapper_source(c), config = cmake_config(c),
                    config_version = cmake_config_version(CAKE_VERSION), torch_cpp = torch_source(c),
                    torch_cm = torch_cmake(c);
  const std::string roofline = render_roofline_svg(report), evolution = render_evolution_svg(report);
  const std::string md = render_report_md(report, {true, !evolution.empty()}, usage_markdown(c));
  std::string abi;  // the ABI header every kernel and package includes unchanged
  for (const tracks::SourceFile& f : tracks::prelude_files())
    if (f.name == "cake_kernel_abi.h") abi = f.text;
  if (abi.empty()) throw Error("package " + op + ": the kernel ABI header is not embedded in this build");

  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
    throw Error("package " + op + ": " + out_dir.string() + " exists and is not a directory");
  const fs::path dir = fs::absolute(out_dir);
  Package p;
  p.dir = dir;
  p.library = dir / "lib" / ("libcake_" + op + ".so");
  p.kernel = dir / "lib" / ("cake_" + op + "_kernel.so");
  p.header = dir / "include" / ("cake_" + op + ".h");
  p.cmake_dir = dir / "lib" / "cmake" / ("cake_" + op);
  p.torch_dir = dir / "torch";
  p.report_md = dir / "report.md";
  p.report_json = dir / "report.json";
  p.roofline_svg = dir / "roofline.svg";
  for (const fs::path& d :
       {dir / "lib", dir / "include", p.cmake_dir, p.torch_dir, dir / "share", dir / "src"})
    make_dirs(d);

  write(dir / "include" / "cake_kernel_abi.h", abi);
  write(p.header, header);
  write(dir / "src" / ("cake_" + op + "_wrapper.c"), wrapper);
  write(p.cmake_dir / ("cake_" + op + "Config.cmake"), config);
  write(p.cmake_dir / ("cake_" + op + "ConfigVersion.cmake"), config_version);
  write(p.torch_dir / ("cake_" + op + "_torch.cpp"), torch_cpp);
  write(p.torch_dir / "CMakeLists.txt", torch_cm);
  write(dir / "share" / "contract.yaml", contract_text);
  write(p.report_json, report.dump(2) + "\n");
  write(p.report_md, md);
  write(p.roofline_svg, roofline);
  if (!evolution.empty()) {
    write(dir / "evolution.svg", evolution);
  } else {
    fs::remove(dir / "evolution.svg", ec);
  }
  copy_atomic(in.kernel_library, p.kernel);
  compile_wrapper(op, dir, options);
  return p;
}

}  // namespace cake::deliver
