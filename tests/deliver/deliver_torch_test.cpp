// The package's PyTorch binding (DESIGN §9), built the way a user builds it: the softmax package's torch/
// project on its own against Debian's libtorch, then tests/deliver/torch_consumer (a libtorch program that
// loads the op library and calls cake::softmax through the dispatcher) compared with torch::softmax at the
// precision the f32 / bf16 gate implies. The same consumer also checks the torch ops of conv2d,
// quantize_int8, rms_norm and cast over stand-in kernels: schemas (int size arguments, tuple returns, float
// defaults, a ScalarType argument), inferred output shapes and dtypes, argument errors.
#include <gtest/gtest.h>

#include <iostream>

#include "deliver/codegen.h"
#include "deliver_test_util.h"

namespace cake {
namespace {

using namespace deliver_test;

std::vector<std::string> cmake_configure(const fs::path& src, const fs::path& bin) {
  std::vector<std::string> v{CAKE_CMAKE_COMMAND,
                             "-S",
                             src.string(),
                             "-B",
                             bin.string(),
                             "-G",
                             CAKE_CMAKE_GENERATOR,
                             "-DCMAKE_BUILD_TYPE=Release",
                             "-DTorch_DIR=" CAKE_TORCH_DIR};
  if (std::string(CAKE_MAKE_PROGRAM).size()) v.push_back("-DCMAKE_MAKE_PROGRAM=" CAKE_MAKE_PROGRAM);
  return v;
}

TEST(DeliverTorch, PackageOpsBuildLoadAndMatchTorch) {
  // 1. The softmax package's own torch/ project, as a user builds it.
  const deliver::Package& p = bench_package("softmax");
  const fs::path tb = temp_root() / "torch-softmax-build";
  const Cmd c1 = run(cmake_configure(p.torch_dir, tb), temp_root(), 180);
  ASSERT_TRUE(c1.ok()) << c1.out;
  const Cmd b1 = run({CAKE_CMAKE_COMMAND, "--build", tb.string()}, temp_root(), 300);
  ASSERT_TRUE(b1.ok()) << b1.out;
  const fs::path softmax_op = tb / "libcake_softmax_torch.so";
  ASSERT_TRUE(fs::is_regular_file(softmax_op));

  // 2. Stand-in packages for the schema and shape checks, built inside the consumer's tree.
  const std::vector<std::string> extra{"conv2d", "quantize_int8", "rms_norm", "cast"};
  std::string dirs;
  for (const std::string& op : extra) {
    deliver::PackageInput in;
    in.contract = bench_contract(op);
    in.kernel_library = dummy_kernel();
    const deliver::Package q = deliver::write_package(in, temp_root() / "extra" / op);
    dirs += (dirs.empty() ? "" : ";") + q.torch_dir.string();
  }
  const fs::path src = temp_root() / "torch-consumer-src", bin = temp_root() / "torch-consumer-build";
  fs::remove_all(src);
  fs::copy(fs::path(CAKE_SOURCE_DIR) / "tests" / "deliver" / "torch_consumer", src,
           fs::copy_options::recursive);
  std::vector<std::string> conf = cmake_configure(src, bin);
  conf.push_back("-DCAKE_EXTRA_TORCH_DIRS=" + dirs);
  const Cmd c2 = run(conf, temp_root(), 180);
  ASSERT_TRUE(c2.ok()) << c2.out;
  const Cmd b2 = run({CAKE_CMAKE_COMMAND, "--build", bin.string()}, temp_root(), 400);
  ASSERT_TRUE(b2.ok()) << b2.out;

  // 3. cake::softmax against torch::softmax.
  const Cmd r1 = run({(bin / "torch_consumer").string(), "softmax", softmax_op.string()}, temp_root(), 120);
  EXPECT_EQ(r1.rc, 0) << r1.out;
  EXPECT_NE(r1.out.find("all ok"), std::string::npos) << r1.out;
  EXPECT_EQ(r1.out.find("FAIL"), std::string::npos) << r1.out;
  EXPECT_NE(r1.out.find("ok   f32 softmax 3x2048"), std::string::npos) << r1.out;
  EXPECT_NE(r1.out.find("ok   bf16 softmax 16x100"), std::string::npos) << r1.out;
  EXPECT_NE(r1.out.find("ok   non-contiguous input"), std::string::npos) << r1.out;
  std::cout << r1.out;

  // 4. The stand-in ops: schemas as generated, shapes inferred, bad arguments refused with messages.
  std::vector<std::string> argv{(bin / "torch_consumer").string(), "shapes"};
  for (size_t i = 0; i < extra.size(); ++i)
    argv.push_back((bin / "extra" / std::to_string(i) / ("libcake_" + extra[i] + "_torch.so")).string());
  const Cmd r2 = run(argv, temp_root(), 120);
  EXPECT_EQ(r2.rc, 0) << r2.out;
  EXPECT_EQ(r2.out.find("FAIL"), std::string::npos) << r2.out;
  // Schemas as generated; torch prints float defaults at full precision (1e-06 as 9.9999999999999995e-07).
  for (const std::string op : {"conv2d", "quantize_int8", "cast"})
    EXPECT_NE(r2.out.find("schema cake::" + deliver::torch_schema(bench_contract(op)) + "\n"),
              std::string::npos)
        << op << "\n"
        << r2.out;
  const std::string rms = "schema cake::rms_norm(Tensor x, Tensor w, float eps=";
  const size_t at = r2.out.find(rms);
  ASSERT_NE(at, std::string::npos) << r2.out;
  EXPECT_NEAR(std::stod(r2.out.substr(at + rms.size())), 1e-6, 1e-12) << r2.out;
  EXPECT_NE(r2.out.find("ok   conv2d output shape [1, 3, 3, 3]"), std::string::npos) << r2.out;
  EXPECT_NE(r2.out.find("ok   quantize_int8 scale: f32 [4]"), std::string::npos) << r2.out;
  EXPECT_NE(r2.out.find("ok   cast output: f16 [2, 3]"), std::string::npos) << r2.out;
}

}  // namespace
}  // namespace cake
