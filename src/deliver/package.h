// The deployable operator package (DESIGN §9): from a checked contract and its verified kernel, a folder
// a user builds against without CAKE:
//   lib/libcake_<op>.so           C wrapper: cake_<op>_run (uniform C ABI) + typed entry points per dtype;
//                                 loads lib/cake_<op>_kernel.so (RTLD_LOCAL, from its own directory) on first
//                                 use
//   lib/cake_<op>_kernel.so       the verified kernel, copied (exports cake_run)
//   include/cake_<op>.h           C header, with include/cake_kernel_abi.h
//   lib/cmake/cake_<op>/          cake_<op>Config.cmake + ConfigVersion: imported target cake::<op>
//   torch/                        PyTorch custom op cake::<op> (source + CMakeLists.txt) over cake::<op>
//   report.json, report.md, roofline.svg (and evolution.svg when the report has rounds)
//   share/contract.yaml           the contract;  src/cake_<op>_wrapper.c  the wrapper's source
// See docs/deliver.md.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/contract.h"

namespace cake::deliver {

// The status a package's entry points return when the kernel library cannot be loaded (CAKE_ERR_LOAD in
// the generated header; the kernel ABI's own codes are 1..7).
inline constexpr int kErrLoad = 100;

struct PackageInput {
  CheckedContract contract;
  std::filesystem::path contract_file;   // copied into the package as share/contract.yaml (empty: the
                                         // contract's own source text is written)
  std::filesystem::path kernel_library;  // built .so exporting cake_run (the verified kernel)
  nlohmann::json report;                 // the report content (object or null); written as report.json
};

struct Package {
  std::filesystem::path dir, library, header, cmake_dir, torch_dir, report_md, report_json;
  std::filesystem::path kernel;        // lib/cake_<op>_kernel.so
  std::filesystem::path roofline_svg;  // roofline.svg
};

struct PackageOptions {
  std::string cc;                         // C compiler for the wrapper; empty: $CAKE_CC, else "cc"
  std::vector<std::string> extra_cflags;  // appended to the wrapper's compile line (e.g. -Werror)
  double timeout_s = 120;                 // for the wrapper's compile
};

// Writes (or overwrites the files of) the package in out_dir and compiles its wrapper library. Throws
// cake::Error with a clear message when the operator name is not a C identifier, the kernel library is
// missing or does not export cake_run, the contract file cannot be read, the report is not an object,
// out_dir cannot be written, or the wrapper does not compile (with the compiler's output).
Package write_package(const PackageInput& in, const std::filesystem::path& out_dir,
                      const PackageOptions& options = {});

}  // namespace cake::deliver
