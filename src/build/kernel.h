// A built kernel loaded into this process: dlopen of the shared object and its `cake_run` entry point
// (uniform C ABI, DESIGN §5). The evaluation harness runs kernels it does not trust in a child
// process; this loader is for kernels whose source CAKE generated, and for that child.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cases/cases.h"
#include "contract/contract.h"
#include "core/kernel_abi.h"
#include "core/tensor.h"

namespace cake::build {

class Kernel {
 public:
  // Throws cake::Error (with dlerror's text) when the library does not load or lacks the symbol.
  explicit Kernel(const std::filesystem::path& library, const std::string& symbol = "cake_run");
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  Kernel(Kernel&& o) noexcept;

  // Calls the kernel on the tensors; returns its status code (0 = success).
  int run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
          const std::vector<double>& params) const;
  cake_run_fn fn() const { return fn_; }

 private:
  void* handle_ = nullptr;
  cake_run_fn fn_ = nullptr;
};

// Runs the kernel on a case: fresh inputs (cases::make_inputs), outputs pre-filled with NaN, the
// case's ABI scalars (cases::kernel_params). Throws cake::Error naming the status on a non-zero code.
std::vector<Tensor> run_case(const Kernel& k, const CheckedContract& c, const cases::Case& kc);

}  // namespace cake::build
