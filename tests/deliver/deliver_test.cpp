// Tests of the operator package (DESIGN §9): the layout write_package produces for softmax and add (real
// simd kernels); a separate CMake project (tests/deliver/consumer) that find_packages both, links both into
// one C program and whose outputs pass the precision gate against the reference; the wrapper's exported
// symbols, argument checks and missing-kernel path in this process; write_package's errors; wrapper
// generation for every bench operator (compiled with -Werror); report rendering.
#include <gtest/gtest.h>

#include <thread>

#include "deliver/codegen.h"
#include "deliver/report.h"
#include "deliver_test_util.h"
#include "eval/precision.h"
#include "reference/reference.h"

namespace cake {
namespace {

using namespace deliver_test;
using RunFn = int (*)(const cake_tensor*, int, cake_tensor*, int, const double*, int);
using MsgFn = const char* (*)();
using LoadFn = int (*)();

std::string slurp(const fs::path& p) {
  return read_file(p).value_or("<missing " + p.string() + ">");
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// ---- layout ----

TEST(DeliverPackage, LayoutOfSoftmaxAndAdd) {
  for (const std::string op : {"softmax", "add"}) {
    SCOPED_TRACE(op);
    const deliver::Package& p = bench_package(op);
    const CheckedContract c = bench_contract(op);
    EXPECT_EQ(p.library, p.dir / "lib" / ("libcake_" + op + ".so"));
    EXPECT_EQ(p.header, p.dir / "include" / ("cake_" + op + ".h"));
    EXPECT_EQ(p.cmake_dir, p.dir / "lib" / "cmake" / ("cake_" + op));
    for (const fs::path& f :
         {p.library, p.kernel, p.header, p.dir / "include" / "cake_kernel_abi.h",
          p.cmake_dir / ("cake_" + op + "Config.cmake"), p.cmake_dir / ("cake_" + op + "ConfigVersion.cmake"),
          p.torch_dir / ("cake_" + op + "_torch.cpp"), p.torch_dir / "CMakeLists.txt", p.report_md,
          p.report_json, p.roofline_svg, p.dir / "evolution.svg", p.dir / "share" / "contract.yaml"})
      EXPECT_TRUE(fs::is_regular_file(f)) << f;
    // The kernel is a copy of the verified one, byte for byte.
    EXPECT_EQ(slurp(p.kernel), slurp(simd_kernel(c)));
    EXPECT_EQ(slurp(p.dir / "share" / "contract.yaml"),
              slurp(fs::path(CAKE_SOURCE_DIR) / "bench" / "ops" / (op + ".yaml")));
    EXPECT_EQ(nlohmann::json::parse(slurp(p.report_json)), synthetic_report(c));

    const std::string h = slurp(p.header);
    EXPECT_NE(h.find("#include \"cake_kernel_abi.h\""), std::string::npos);
    EXPECT_NE(h.find("int cake_" + op + "_run(const cake_tensor* in, int n_in"), std::string::npos);
    for (DType d : c.contract.dtypes)
      EXPECT_NE(h.find(deliver::typed_entry_decl(c, d) + ";"), std::string::npos);
    EXPECT_NE(h.find(c.hash), std::string::npos);
    const std::string cfg = slurp(p.cmake_dir / ("cake_" + op + "Config.cmake"));
    EXPECT_NE(cfg.find("add_library(cake::" + op + " SHARED IMPORTED)"), std::string::npos);
    const std::string torch = slurp(p.torch_dir / ("cake_" + op + "_torch.cpp"));
    EXPECT_NE(torch.find("TORCH_LIBRARY_FRAGMENT(cake, m)"), std::string::npos);
    EXPECT_NE(torch.find("TORCH_LIBRARY_IMPL(cake, CPU, m)"), std::string::npos);

    const std::string md = slurp(p.report_md);
    EXPECT_NE(md.find("# Operator package report: " + op), std::string::npos);
    EXPECT_NE(md.find("![roofline](roofline.svg)"), std::string::npos);
    EXPECT_NE(md.find("| chosen | simd |"), std::string::npos);
    for (const cases::Case& k : cases::make_cases(c, cases::Set::Standard))
      EXPECT_NE(md.find("| " + k.id() + " | " + k.describe() + " |"), std::string::npos) << k.id();
    const std::string svg = slurp(p.roofline_svg);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_EQ(count(svg, "<circle class=\"case\""), c.contract.standard.count);
    EXPECT_NE(svg.find("bandwidth roof"), std::string::npos);
  }
  EXPECT_EQ(deliver::typed_entry_decl(bench_contract("softmax"), DType::f32),
            "int cake_softmax_f32(const float* x, float* y, int64_t N, int64_t D)");
  EXPECT_EQ(
      deliver::typed_entry_decl(bench_contract("rms_norm"), DType::bf16),
      "int cake_rms_norm_bf16(const uint16_t* x, const uint16_t* w, uint16_t* y, double eps, int64_t N, "
      "int64_t D)");
}

// Only the package's API leaves the wrapper: in particular not cake_run, so two packages can share a program.
TEST(DeliverPackage, WrapperExportsItsApiButNotCakeRun) {
  const deliver::Package& p = bench_package("softmax");
  const Lib lib(p.library);
  for (const char* s : {"cake_softmax_run", "cake_softmax_f32", "cake_softmax_bf16",
                        "cake_softmax_last_error", "cake_softmax_load", "cake_softmax_contract_hash"})
    EXPECT_NE(lib.sym(s), nullptr) << s;
  EXPECT_EQ(lib.sym("cake_run"), nullptr);
  EXPECT_EQ(lib.sym("cake_w_load"), nullptr);
  ASSERT_EQ(lib.fn<LoadFn>("cake_softmax_load")(), 0) << lib.fn<MsgFn>("cake_softmax_last_error")();
  EXPECT_EQ(lib.sym("cake_run"), nullptr);  // the kernel was loaded RTLD_LOCAL, not into the wrapper's scope
  EXPECT_EQ(std::string(lib.fn<MsgFn>("cake_softmax_contract_hash")()), bench_contract("softmax").hash);
  const Cmd d = run({"readelf", "-d", p.library.string()}, p.dir, 30);
  if (d.rc != -1) {
    EXPECT_NE(d.out.find("libcake_softmax.so"), std::string::npos) << d.out;  // SONAME
    EXPECT_NE(d.out.find("$ORIGIN"), std::string::npos) << d.out;             // RUNPATH
  }
}

// ---- the consumer project ----

TEST(DeliverPackage, SeparateCMakeProjectLinksBothAndMatchesTheReference) {
  const deliver::Package& ps = bench_package("softmax");
  const deliver::Package& pa = bench_package("add");
  const fs::path src = temp_root() / "consumer-src", bin = temp_root() / "consumer-build";
  fs::remove_all(src);
  fs::copy(fs::path(CAKE_SOURCE_DIR) / "tests" / "deliver" / "consumer", src, fs::copy_options::recursive);
  std::vector<std::string> conf{CAKE_CMAKE_COMMAND,
                                "-S",
                                src.string(),
                                "-B",
                                bin.string(),
                                "-G",
                                CAKE_CMAKE_GENERATOR,
                                "-DCMAKE_BUILD_TYPE=Release",
                                "-DCMAKE_PREFIX_PATH=" + ps.dir.string() + ";" + pa.dir.string()};
  if (std::string(CAKE_MAKE_PROGRAM).size()) conf.push_back("-DCMAKE_MAKE_PROGRAM=" CAKE_MAKE_PROGRAM);
  const Cmd cf = run(conf, temp_root(), 120);
  ASSERT_TRUE(cf.ok()) << cf.out;
  const Cmd bd = run({CAKE_CMAKE_COMMAND, "--build", bin.string()}, temp_root(), 120);
  ASSERT_TRUE(bd.ok()) << bd.out;

  const CheckedContract cs = bench_contract("softmax"), ca = bench_contract("add");
  const cases::Case ks = small_case(cs, DType::f32), ka = small_case(ca, DType::bf16);
  const fs::path io = temp_root() / "consumer-io";
  fs::create_directories(io);
  write_tensors(io / "softmax.in", cases::make_inputs(cs, ks), cases::kernel_params(cs, ks));
  write_tensors(io / "add.in", cases::make_inputs(ca, ka), cases::kernel_params(ca, ka));
  const Cmd r = run({(bin / "consumer").string(), (io / "softmax.in").string(), (io / "softmax.out").string(),
                     (io / "add.in").string(), (io / "add.out").string()},
                    io, 120);
  ASSERT_TRUE(r.ok()) << r.out;
  EXPECT_NE(r.out.find("softmax " + cs.hash), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("add " + ca.hash), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bad call: 1 cake_add_run: expected 2 input and 1 output tensors"), std::string::npos)
      << r.out;

  for (const auto& [c, k, file] : {std::tuple{&cs, &ks, "softmax.out"}, std::tuple{&ca, &ka, "add.out"}}) {
    SCOPED_TRACE(c->contract.name + " " + k->describe());
    const std::vector<Tensor> got = read_tensors(io / file), want = reference::cached_outputs(*c, *k);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got[0].dtype(), want[0].dtype());
    const eval::GateResult g = eval::precision_gate(got[0], want[0]);
    EXPECT_TRUE(g.pass) << g.str();
  }
}

// ---- the wrapper in this process ----

TEST(DeliverPackage, TypedEntryPointAndArgumentChecksInProcess) {
  const Lib ls(bench_package("softmax").library), la(bench_package("add").library);
  const CheckedContract cs = bench_contract("softmax"), ca = bench_contract("add");

  // softmax bf16 through its typed entry point passes the gate.
  const cases::Case k = small_case(cs, DType::bf16);
  const std::vector<Tensor> in = cases::make_inputs(cs, k);
  Tensor y(DType::bf16, in[0].shape());
  auto f = ls.fn<int (*)(const uint16_t*, uint16_t*, int64_t, int64_t)>("cake_softmax_bf16");
  ASSERT_EQ(f(static_cast<const uint16_t*>(in[0].data()), static_cast<uint16_t*>(y.data()), in[0].shape()[0],
              in[0].shape()[1]),  // N, D
            0)
      << ls.fn<MsgFn>("cake_softmax_last_error")();
  const eval::GateResult g = eval::precision_gate(y, reference::cached_outputs(cs, k)[0]);
  EXPECT_TRUE(g.pass) << g.str();

  // add through cake_add_run: every kind of bad call gets its code and a message that says what is wrong.
  auto run_add = la.fn<RunFn>("cake_add_run");
  auto msg = [&] { return std::string(la.fn<MsgFn>("cake_add_last_error")()); };
  Tensor x(DType::f32, {3, 5}), yv(DType::f32, {5}), z(DType::f32, {3, 5});
  cake_tensor ins[2] = {x.abi(), yv.abi()}, outs[1] = {z.abi()};
  double p[2] = {3, 5};
  for (int i = 0; i < 15; ++i) x.set(i, i);
  for (int i = 0; i < 5; ++i) yv.set(i, 100 * i);
  ASSERT_EQ(run_add(ins, 2, outs, 1, p, 2), 0) << msg();
  EXPECT_EQ(msg(), "");
  EXPECT_EQ(z.get(7), 7 + 200);

  EXPECT_EQ(run_add(ins, 1, outs, 1, p, 2), CAKE_ERR_ARGS);
  EXPECT_EQ(run_add(ins, 2, outs, 1, p, 1), CAKE_ERR_ARGS);
  EXPECT_NE(msg().find("expected 2 params (M, N), got 1"), std::string::npos) << msg();
  EXPECT_EQ(run_add(nullptr, 2, outs, 1, p, 2), CAKE_ERR_ARGS);
  double bad[2] = {3, 5.5};
  EXPECT_EQ(run_add(ins, 2, outs, 1, bad, 2), CAKE_ERR_SHAPE);
  EXPECT_NE(msg().find("size N = 5.5 is not a non-negative integer"), std::string::npos) << msg();
  double neg[2] = {-1, 5};
  EXPECT_EQ(run_add(ins, 2, outs, 1, neg, 2), CAKE_ERR_SHAPE);
  double other[2] = {3, 4};
  EXPECT_EQ(run_add(ins, 2, outs, 1, other, 2), CAKE_ERR_SHAPE);
  EXPECT_NE(msg().find("input x has shape [3, 5], expected [M, N] = [3, 4]"), std::string::npos) << msg();
  cake_tensor wrong = ins[1];
  wrong.dtype = static_cast<int32_t>(DType::f16);
  cake_tensor mixed[2] = {ins[0], wrong};
  EXPECT_EQ(run_add(mixed, 2, outs, 1, p, 2), CAKE_ERR_DTYPE);
  EXPECT_NE(msg().find("input y has dtype f16, expected f32"), std::string::npos) << msg();
  cake_tensor i32[2] = {ins[0], ins[1]};
  i32[0].dtype = i32[1].dtype = static_cast<int32_t>(DType::i32);
  EXPECT_EQ(run_add(i32, 2, outs, 1, p, 2), CAKE_ERR_DTYPE);
  EXPECT_NE(msg().find("the operator supports f32, bf16, f16"), std::string::npos) << msg();
  cake_tensor strided[2] = {ins[0], ins[1]};
  strided[0].stride[0] = 10;
  EXPECT_EQ(run_add(strided, 2, outs, 1, p, 2), CAKE_ERR_LAYOUT);
  cake_tensor nodata[1] = {outs[0]};
  nodata[0].data = nullptr;
  EXPECT_EQ(run_add(ins, 2, nodata, 1, p, 2), CAKE_ERR_ARGS);
  auto typed = la.fn<int (*)(const float*, const float*, float*, int64_t, int64_t)>("cake_add_f32");
  EXPECT_EQ(typed(nullptr, static_cast<const float*>(yv.data()), static_cast<float*>(z.data()), 3, 5),
            CAKE_ERR_ARGS);
  EXPECT_EQ(msg().rfind("cake_add_f32: input x has no data", 0), 0u) << msg();
  EXPECT_EQ(typed(static_cast<const float*>(x.data()), static_cast<const float*>(yv.data()),
                  static_cast<float*>(z.data()), 3, 5),
            0);
  // softmax's error state is its own.
  EXPECT_EQ(std::string(ls.fn<MsgFn>("cake_softmax_last_error")()), "");
}

TEST(DeliverPackage, MissingKernelReturnsAnErrorNotACrash) {
  const deliver::Package& p = bench_package("add");
  const fs::path broken = temp_root() / "broken-add";
  fs::remove_all(broken);
  fs::copy(p.dir, broken, fs::copy_options::recursive);
  ASSERT_TRUE(fs::remove(broken / "lib" / "cake_add_kernel.so"));
  const Lib lib(broken / "lib" / "libcake_add.so");
  auto msg = [&] { return std::string(lib.fn<MsgFn>("cake_add_last_error")()); };
  EXPECT_EQ(lib.fn<LoadFn>("cake_add_load")(), deliver::kErrLoad);
  EXPECT_NE(msg().find((broken / "lib" / "cake_add_kernel.so").string()), std::string::npos) << msg();
  EXPECT_NE(msg().find("cannot load the kernel"), std::string::npos) << msg();
  Tensor x(DType::f32, {2, 3}), y(DType::f32, {3}), z(DType::f32, {2, 3});
  cake_tensor ins[2] = {x.abi(), y.abi()}, outs[1] = {z.abi()};
  const double prm[2] = {2, 3};
  EXPECT_EQ(lib.fn<RunFn>("cake_add_run")(ins, 2, outs, 1, prm, 2), deliver::kErrLoad);
  auto typed = lib.fn<int (*)(const float*, const float*, float*, int64_t, int64_t)>("cake_add_f32");
  EXPECT_EQ(typed(static_cast<const float*>(x.data()), static_cast<const float*>(y.data()),
                  static_cast<float*>(z.data()), 2, 3),
            deliver::kErrLoad);
  EXPECT_EQ(msg().rfind("cake_add_f32: cannot load the kernel", 0), 0u) << msg();

  // A kernel file that exists but exports no cake_run is refused the same way.
  fs::copy_file(broken / "lib" / "libcake_add.so", broken / "lib" / "cake_add_kernel.so");
  EXPECT_EQ(lib.fn<LoadFn>("cake_add_load")(), deliver::kErrLoad);
  EXPECT_NE(msg().find("does not export cake_run"), std::string::npos) << msg();
  // And once the kernel is back, the same process recovers.
  fs::copy_file(p.kernel, broken / "lib" / "cake_add_kernel.so", fs::copy_options::overwrite_existing);
  EXPECT_EQ(lib.fn<LoadFn>("cake_add_load")(), 0) << msg();
  EXPECT_EQ(lib.fn<RunFn>("cake_add_run")(ins, 2, outs, 1, prm, 2), 0) << msg();
}

// Many threads making the first call at once: the kernel loads once and every call gets the right answer.
TEST(DeliverPackage, FirstCallsFromManyThreadsAreSafe) {
  const deliver::Package& p = bench_package("add");
  const fs::path copy = temp_root() / "threads-add";  // a fresh copy: its kernel is not loaded yet
  fs::remove_all(copy);
  fs::copy(p.dir, copy, fs::copy_options::recursive);
  const Lib lib(copy / "lib" / "libcake_add.so");
  auto typed = lib.fn<int (*)(const float*, const float*, float*, int64_t, int64_t)>("cake_add_f32");
  constexpr int kThreads = 8;
  const int64_t M = 16, N = 33;
  std::vector<float> x(M * N), y(N);
  for (int64_t i = 0; i < M * N; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  for (int64_t j = 0; j < N; ++j) y[static_cast<size_t>(j)] = static_cast<float>(1000 * j);
  std::vector<std::vector<float>> z(kThreads, std::vector<float>(M * N, -1));
  std::vector<int> rc(kThreads, -1);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] { rc[t] = typed(x.data(), y.data(), z[t].data(), M, N); });
  for (std::thread& t : ts) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(rc[t], 0) << t;
    EXPECT_EQ(z[t][5 * N + 7], static_cast<float>(5 * N + 7 + 7000)) << t;
  }
}

// ---- write_package's errors ----

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(DeliverPackage, WritePackageRejectsBadInput) {
  auto input = [] {
    deliver::PackageInput in;
    in.contract = bench_contract("add");
    in.kernel_library = dummy_kernel();
    return in;
  };
  const fs::path out = temp_root() / "bad";
  const std::string source = bench_contract("add").contract.source;
  EXPECT_NO_THROW(deliver::write_package(input(), out / "ok"));

  auto fails = [&](const std::string& what, auto&& modify, const std::string& dir,
                   const deliver::PackageOptions& o = {}) {
    deliver::PackageInput in = input();
    modify(in);
    const std::string e = error_of([&] { deliver::write_package(in, out / dir, o); });
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  fails(
      "nope.so does not exist",
      [&](deliver::PackageInput& in) { in.kernel_library = temp_root() / "nope.so"; }, "a");
  fails(
      "does not export cake_run",  // a shared object without cake_run
      [&](deliver::PackageInput& in) { in.kernel_library = out / "ok" / "lib" / "libcake_add.so"; }, "b");
  fails(
      "does not load", [&](deliver::PackageInput& in) { in.kernel_library = out / "ok" / "report.md"; }, "c");
  fails(
      "must be a JSON object",
      [](deliver::PackageInput& in) {
        in.report = nlohmann::json::array({1, 2});
      },
      "d");
  fails(
      "not a C identifier", [](deliver::PackageInput& in) { in.contract.contract.name = "my-op"; }, "e");
  fails(
      "cannot read the contract file",
      [&](deliver::PackageInput& in) { in.contract_file = temp_root() / "absent.yaml"; }, "f");
  std::ofstream(out / "file") << "x";
  fails(
      "not a directory", [](deliver::PackageInput&) {}, "file");
  deliver::PackageOptions no_cc;
  no_cc.cc = "/nonexistent/cc";
  fails(
      "could not be run", [](deliver::PackageInput&) {}, "g", no_cc);
  deliver::PackageOptions bad_flag;
  bad_flag.extra_cflags = {"-fno-such-flag-anywhere"};
  fails(
      "compiling the wrapper library failed", [](deliver::PackageInput&) {}, "h", bad_flag);
  // Without a contract file, the contract's own text is shipped; a null report becomes {}.
  EXPECT_EQ(slurp(out / "ok" / "share" / "contract.yaml"), source);
  EXPECT_EQ(nlohmann::json::parse(slurp(out / "ok" / "report.json")), nlohmann::json::object());
  EXPECT_FALSE(fs::exists(out / "ok" / "evolution.svg"));
}

// ---- every bench operator ----

// The generated wrapper and header compile warning-free (C and C++) for every contract of the suite, and the
// wrapper's size checks (derived sizes, division by zero, constraints) hold before any kernel runs.
TEST(DeliverPackage, EveryBenchOperatorGeneratesAWarningFreeWrapper) {
  std::vector<std::string> ops;
  for (const auto& e : fs::directory_iterator(fs::path(CAKE_SOURCE_DIR) / "bench" / "ops"))
    if (e.path().extension() == ".yaml") ops.push_back(e.path().stem().string());
  std::sort(ops.begin(), ops.end());
  ASSERT_GE(ops.size(), 20u);
  deliver::PackageOptions o;
  o.extra_cflags = {"-Werror"};
  for (const std::string& op : ops) {
    SCOPED_TRACE(op);
    deliver::PackageInput in;
    in.contract = bench_contract(op);
    in.kernel_library = dummy_kernel();
    deliver::Package p;
    ASSERT_NO_THROW(p = deliver::write_package(in, temp_root() / "all" / op, o));
    EXPECT_TRUE(fs::is_regular_file(p.library));
    const fs::path probe = temp_root() / "all" / (op + "_probe.cpp");
    std::ofstream(probe) << "#include \"cake_" << op << ".h\"\nint main() { return cake_" << op
                         << "_load(); }\n";
    const Cmd cxx = run({"c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                         "-I" + (p.dir / "include").string(), probe.string()},
                        p.dir, 60);
    EXPECT_TRUE(cxx.ok()) << cxx.out;
    EXPECT_NE(slurp(p.torch_dir / ("cake_" + op + "_torch.cpp")).find(deliver::torch_schema(in.contract)),
              std::string::npos);
  }
  EXPECT_EQ(deliver::torch_schema(bench_contract("conv2d")),
            "conv2d(Tensor x, Tensor w, Tensor b, int S, int P) -> Tensor");
  EXPECT_EQ(deliver::torch_schema(bench_contract("quantize_int8")),
            "quantize_int8(Tensor x) -> (Tensor, Tensor)");
  EXPECT_EQ(deliver::torch_schema(bench_contract("rms_norm")),
            "rms_norm(Tensor x, Tensor w, float eps=1e-06) -> Tensor");
  EXPECT_EQ(deliver::torch_schema(bench_contract("scatter_add")),
            "scatter_add(Tensor src, Tensor idx, int V) -> Tensor");
  EXPECT_EQ(deliver::torch_schema(bench_contract("rope")),
            "rope(Tensor x, Tensor cos_t, Tensor sin_t) -> Tensor");
  EXPECT_EQ(deliver::torch_schema(bench_contract("cast")), "cast(Tensor x, ScalarType dtype) -> Tensor");

  // conv2d's wrapper: sizes N C H W O KH KW S P (free), Ho and Wo derived.
  const Lib lib(temp_root() / "all" / "conv2d" / "lib" / "libcake_conv2d.so");
  auto typed = lib.fn<int (*)(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t,
                              int64_t, int64_t, int64_t, int64_t, int64_t, int64_t)>("cake_conv2d_f32");
  auto msg = [&] { return std::string(lib.fn<MsgFn>("cake_conv2d_last_error")()); };
  const CheckedContract c = bench_contract("conv2d");
  EXPECT_EQ(
      deliver::typed_entry_decl(c, DType::f32),
      "int cake_conv2d_f32(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, "
      "int64_t H, int64_t W, int64_t O, int64_t KH, int64_t KW, int64_t S, int64_t P)");
  std::vector<float> x(1 * 2 * 5 * 5), w(3 * 2 * 3 * 3), b(3), y(1 * 3 * 3 * 3);
  EXPECT_EQ(typed(x.data(), w.data(), b.data(), y.data(), 1, 2, 5, 5, 3, 3, 3, 2, 1), 0) << msg();
  EXPECT_EQ(typed(x.data(), w.data(), b.data(), y.data(), 1, 2, 5, 5, 3, 3, 3, 0, 1), CAKE_ERR_SHAPE);
  EXPECT_NE(msg().find("divides by zero"), std::string::npos) << msg();
  EXPECT_EQ(typed(x.data(), w.data(), b.data(), y.data(), 1, 2, 1, 5, 3, 3, 3, 1, 0), CAKE_ERR_SHAPE);
  EXPECT_NE(msg().find("constraint H + 2 * P >= KH does not hold"), std::string::npos) << msg();
}

// ---- report ----

TEST(DeliverReport, RendersWhatIsThereAndNeverThrows) {
  using nlohmann::json;
  const std::string empty = deliver::render_report_md(json::object());
  EXPECT_NE(empty.find("# Operator package report"), std::string::npos);
  EXPECT_EQ(empty.find("## Cases"), std::string::npos);
  EXPECT_EQ(deliver::render_evolution_svg(json::object()), "");
  EXPECT_EQ(deliver::roofline_point_count(json::object()), 0);
  EXPECT_NE(deliver::render_roofline_svg(json::object()).find("no timed cases"), std::string::npos);

  const json odd = {
      {"operator", 7},
      {"score", "high"},
      {"cases",
       {{{"id", "a|b"}, {"flops", "many"}, {"t_cand_s", -1}},
        3,
        {{"id", "c"}, {"flops", 10}, {"bytes", 0}, {"t_cand_s", 1}}}},
      {"machine", "fast"},
      {"routing", {1, 2}},
      {"evolution", {{{"round", "x"}}}},
      {"evolution_confirmation", {{"repeats", "many"}, {"best_median", 3}, {"seed_median", nullptr}}}};
  std::string md;
  ASSERT_NO_THROW(md = deliver::render_report_md(odd));
  EXPECT_NE(md.find("| a\\|b |"), std::string::npos) << md;  // pipes in cells are escaped
  EXPECT_EQ(deliver::roofline_point_count(odd), 0);
  ASSERT_NO_THROW(deliver::render_roofline_svg(odd));
  ASSERT_NO_THROW(deliver::render_evolution_svg(odd));
  EXPECT_NE(md.find("median efficiency 3 (best) against failed (seed)"), std::string::npos) << md;

  // Points land under the roofs; a case at the compute roof sits on it.
  const json r = {{"machine", {{"bandwidth_gbs", 10.0}, {"fma_gflops", 100.0}}},
                  {"cases",
                   {{{"id", "m"}, {"verdict", "pass"}, {"flops", 1e6}, {"bytes", 1e7}, {"t_cand_s", 2e-3}},
                    {{"id", "c"}, {"verdict", "fail"}, {"flops", 1e9}, {"bytes", 1e6}, {"t_cand_s", 1e-2}}}}};
  const std::string svg = deliver::render_roofline_svg(r);
  EXPECT_EQ(deliver::roofline_point_count(r), 2);
  EXPECT_EQ(count(svg, "<circle class=\"case\""), 2);
  EXPECT_EQ(count(svg, "fill=\"#e63946\" fill-opacity"), 1);  // the failing case is red
  EXPECT_NE(svg.find("m: AI 0.1 flop/B, 0.5 GFLOP/s, pass"), std::string::npos) << svg;
  EXPECT_NE(svg.find("compute roof 100 GFLOP/s"), std::string::npos);
}

}  // namespace
}  // namespace cake
