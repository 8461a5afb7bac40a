// Checks delivered PyTorch ops from outside CAKE. Each op library is dlopen'ed (its static registrars add
// cake::<op> to the dispatcher) and called through c10::Dispatcher's typed interface.
//   torch_consumer softmax LIB     cake::softmax against torch::softmax (f32 and bf16, non-contiguous input,
//                                  errors on a wrong dtype or rank); exit 1 on any mismatch
//   torch_consumer shapes LIB...   ops over stand-in kernels (conv2d, quantize_int8, rms_norm, cast): their
//                                  schemas, output shapes and dtypes, and argument errors
#include <ATen/core/dispatch/Dispatcher.h>
#include <dlfcn.h>
#include <torch/types.h>

#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::cout << (ok ? "ok   " : "FAIL ") << what << "\n";
  if (!ok) ++failures;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "<no error>";
}

bool load(const char* lib) {
  if (!dlopen(lib, RTLD_NOW | RTLD_GLOBAL)) {
    std::cerr << "cannot load " << lib << ": " << dlerror() << "\n";
    return false;
  }
  return true;
}

bool has_op(const char* name) {
  return c10::Dispatcher::singleton().findSchema({name, ""}).has_value();
}

// The f32 / bf16 gate of CAKE-Bench as allclose: relative 10 T, absolute T near zero.
bool close(const at::Tensor& got, const at::Tensor& want, double T, const std::string& what) {
  const at::Tensor g = got.to(at::kFloat), w = want.to(at::kFloat);
  const bool same = g.sizes() == w.sizes();
  const bool ok = same && torch::allclose(g, w, 10 * T, T);
  double mare = -1;
  if (same && g.numel() > 0) mare = ((g - w).abs() / (w.abs() + 1e-7)).max().item<double>();
  std::ostringstream os;
  os << what << " (max relative error " << std::scientific << std::setprecision(2) << mare << ")";
  check(ok, os.str());
  return ok;
}

void softmax_checks() {
  auto op = c10::Dispatcher::singleton()
                .findSchemaOrThrow("cake::softmax", "")
                .typed<at::Tensor(const at::Tensor&)>();
  torch::manual_seed(7);
  const double T32 = std::ldexp(1.0, -13), T16 = std::ldexp(1.0, -7);
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{1, 1}, {7, 33}, {64, 127}, {3, 2048}}) {
    const at::Tensor x = torch::randn(shape) * 2;
    const at::Tensor y = op.call(x);
    check(y.scalar_type() == at::kFloat, "f32 output dtype");
    close(y, torch::softmax(x, -1), T32,
          "f32 softmax " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]));
  }
  const at::Tensor xb = (torch::randn({16, 100}) * 2).to(at::kBFloat16);
  const at::Tensor yb = op.call(xb);
  check(yb.scalar_type() == at::kBFloat16, "bf16 output dtype");
  close(yb, torch::softmax(xb.to(at::kFloat), -1), T16, "bf16 softmax 16x100");
  const at::Tensor xt = torch::randn({33, 9}).t();  // [9, 33], not contiguous
  close(op.call(xt), torch::softmax(xt, -1), T32, "non-contiguous input");
  const std::string e1 = error_of([&] { op.call(torch::randn({3, 4}, at::kDouble)); });
  check(e1.find("cake::softmax: x has dtype Double; the operator supports float32, bfloat16") !=
            std::string::npos,
        "f64 input refused: " + e1);
  const std::string e2 = error_of([&] { op.call(torch::randn({2, 3, 4})); });
  check(e2.find("x must have rank 2 ([N, D])") != std::string::npos, "rank-3 input refused: " + e2);
}

void shape_checks() {
  auto& d = c10::Dispatcher::singleton();
  if (has_op("cake::conv2d")) {
    auto op =
        d.findSchemaOrThrow("cake::conv2d", "")
            .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, int64_t)>();
    std::cout << "schema " << d.findSchemaOrThrow("cake::conv2d", "").schema() << "\n";
    const at::Tensor x = torch::randn({1, 2, 5, 5}), w = torch::randn({3, 2, 3, 3}), b = torch::randn({3});
    const at::Tensor y = op.call(x, w, b, 2, 1);
    check(y.sizes() == at::IntArrayRef({1, 3, 3, 3}), "conv2d output shape [1, 3, 3, 3]");
    const std::string e1 = error_of([&] { op.call(x, w, b, 0, 1); });
    check(e1.find("divides by zero") != std::string::npos, "conv2d S = 0 refused: " + e1);
    const std::string e2 = error_of([&] { op.call(x, torch::randn({3, 4, 3, 3}), b, 1, 1); });
    check(e2.find("w has shape [3, 4, 3, 3], expected [O, C, KH, KW] = [3, 2, 3, 3]") != std::string::npos,
          "conv2d mismatched w refused: " + e2);
    const std::string e3 = error_of([&] { op.call(x, w.to(at::kBFloat16), b, 1, 1); });
    check(e3.find("w has dtype BFloat16, expected Float (as x)") != std::string::npos,
          "conv2d mixed dtypes: " + e3);
  }
  if (has_op("cake::quantize_int8")) {
    auto op = d.findSchemaOrThrow("cake::quantize_int8", "")
                  .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)>();
    std::cout << "schema " << d.findSchemaOrThrow("cake::quantize_int8", "").schema() << "\n";
    const auto [q, scale] = op.call(torch::randn({4, 6}).to(at::kBFloat16));
    check(q.sizes() == at::IntArrayRef({4, 6}) && q.scalar_type() == at::kChar,
          "quantize_int8 q: int8 [4, 6]");
    check(scale.sizes() == at::IntArrayRef({4}) && scale.scalar_type() == at::kFloat,
          "quantize_int8 scale: f32 [4]");
  }
  if (has_op("cake::rms_norm")) {
    const auto& h = d.findSchemaOrThrow("cake::rms_norm", "");
    std::cout << "schema " << h.schema() << "\n";
    auto op = h.typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
    const at::Tensor y = op.call(torch::randn({5, 8}), torch::randn({8}), 1e-5);
    check(y.sizes() == at::IntArrayRef({5, 8}), "rms_norm output shape [5, 8]");
  }
  if (has_op("cake::cast")) {
    std::cout << "schema " << d.findSchemaOrThrow("cake::cast", "").schema() << "\n";
    auto op = d.findSchemaOrThrow("cake::cast", "").typed<at::Tensor(const at::Tensor&, at::ScalarType)>();
    const at::Tensor y = op.call(torch::randn({2, 3}), at::kHalf);
    check(y.scalar_type() == at::kHalf && y.sizes() == at::IntArrayRef({2, 3}), "cast output: f16 [2, 3]");
    const std::string e = error_of([&] { op.call(torch::randn({2, 3}), at::kInt); });
    check(e.find("the operator supports bfloat16, float16") != std::string::npos,
          "cast to int refused: " + e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[1], "softmax") != 0 && std::strcmp(argv[1], "shapes") != 0)) {
    std::cerr << "usage: torch_consumer softmax LIB | torch_consumer shapes LIB...\n";
    return 2;
  }
  for (int i = 2; i < argc; ++i)
    if (!load(argv[i])) return 2;
  try {
    if (std::strcmp(argv[1], "softmax") == 0)
      softmax_checks();
    else
      shape_checks();
  } catch (const std::exception& e) {
    std::cerr << "unexpected error: " << e.what() << "\n";
    return 3;
  }
  std::cout << (failures ? "FAILED " + std::to_string(failures) : std::string("all ok")) << "\n";
  return failures ? 1 : 0;
}
