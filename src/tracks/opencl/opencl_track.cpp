// The opencl track: feasibility, knob space, lowering to (kernel.cl, host.cpp) and the build recipe
// (offline OpenCL C check with cake-oclc, then g++ of the host into kernel.so linked with -lOpenCL).
// The host creates the context, queue and one program per I/O dtype once per process, wraps the
// caller's tensors in CL_MEM_USE_HOST_PTR buffers (zero copy on a CPU device), keeps intermediates in
// cached __global scratch buffers, enqueues the kernels in statement order and waits.
#include "tracks/opencl/opencl_track.h"

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/kernel_abi.h"
#include "tracks/common/host_code.h"

#ifndef CAKE_OCLC_PATH
#define CAKE_OCLC_PATH "cake-oclc"
#endif

namespace cake::tracks {
namespace opencl {

std::string oclc_path() {
  if (const char* p = std::getenv("CAKE_OCLC"); p && *p) return p;
  return CAKE_OCLC_PATH;
}

namespace {

// Bytes per element of a tensor's storage as a C++ expression of op_dtype.
std::string elem_bytes(const TensorInfo& t) {
  if (t.fixed_dtype) return std::to_string(dtype_size(*t.fixed_dtype));
  return "(op_dtype == 0 ? 4 : 2)";
}

std::string numel(const TensorInfo& t) {
  std::string n;
  for (const auto& d : t.dims) n += (n.empty() ? "" : " * ") + std::string("(") + emit_size_expr(*d) + ")";
  return n.empty() ? "INT64_C(1)" : n;
}

// local_reduce=auto: above this many output elements, one work-item per element keeps the device busy
// and beats a work-group per element (measured on PoCL/CPU: matmul 64x1024 1.7x faster serial, layer_norm
// with 2048 rows 1.3x faster per work-group).
constexpr int kWgMaxPoints = 16384;

const char* kHostSupport = R"CPP(
  struct Program {
    cl_program prog = nullptr;
    cl_kernel k[kKernels] = {};
    bool tried = false, ok = false;
  };

  struct State {
    std::once_flag once;
    bool ok = false;
    cl_device_id dev = nullptr;
    cl_context ctx = nullptr;
    cl_command_queue queue = nullptr;
    bool f64 = false;  // acc_t is double
    std::mutex mu;     // kernels' arguments and the scratch cache are shared: one call at a time
    Program prog[3];   // by I/O dtype code (f32, f16, bf16)
    cl_mem scratch[kScratch + 1] = {};
    size_t scratch_bytes[kScratch + 1] = {};
    cl_mem err = nullptr;
  };

  // Never destroyed: the ICD may be unloaded before static destructors run.
  State& state() {
    static State* s = new State;
    return *s;
  }

  bool has_extension(cl_device_id d, const char* ext) {
    size_t n = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, nullptr, &n) != CL_SUCCESS || n == 0) return false;
    std::string s(n, '\0');
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, &s[0], nullptr) != CL_SUCCESS) return false;
    return s.find(ext) != std::string::npos;
  }

  // The first device of the first platform that has one (cake-oclc picks the same).
  void init(State& s) {
    cl_uint np = 0;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return;
    std::vector<cl_platform_id> ps(np);
    if (clGetPlatformIDs(np, ps.data(), nullptr) != CL_SUCCESS) return;
    for (cl_platform_id p : ps) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &s.dev, &nd) == CL_SUCCESS && nd > 0) break;
      s.dev = nullptr;
    }
    if (!s.dev) return;
    cl_int e = CL_SUCCESS;
    s.ctx = clCreateContext(nullptr, 1, &s.dev, nullptr, nullptr, &e);
    if (e != CL_SUCCESS) return;
    s.queue = clCreateCommandQueue(s.ctx, s.dev, 0, &e);
    if (e != CL_SUCCESS) return;
    s.f64 = kWantF64 && has_extension(s.dev, "cl_khr_fp64");
    s.err = clCreateBuffer(s.ctx, CL_MEM_READ_WRITE, sizeof(cl_int), nullptr, &e);
    s.ok = e == CL_SUCCESS;
  }

  // The program for one I/O dtype, built on first use (PoCL caches the binary across processes).
  Program* program(State& s, int io) {
    if (io < 0 || io > 2) return nullptr;
    Program& p = s.prog[io];
    if (!p.tried) {
      p.tried = true;
      const char* src = kSource;
      const size_t len = sizeof(kSource) - 1;
      cl_int e = CL_SUCCESS;
      p.prog = clCreateProgramWithSource(s.ctx, 1, &src, &len, &e);
      if (e != CL_SUCCESS) return nullptr;
      const std::string opts = "-DCAKE_IO=" + std::to_string(io) + " -DCAKE_ACC_F64=" + (s.f64 ? "1" : "0");
      if (clBuildProgram(p.prog, 1, &s.dev, opts.c_str(), nullptr, nullptr) != CL_SUCCESS) return nullptr;
      for (int i = 0; i < kKernels; ++i) {
        p.k[i] = clCreateKernel(p.prog, kKernelNames[i], &e);
        if (e != CL_SUCCESS) return nullptr;
      }
      p.ok = true;
    }
    return p.ok ? &p : nullptr;
  }

  // A scratch buffer of at least `bytes`, kept across calls (new memory is slow to touch).
  cl_mem scratch(State& s, int i, size_t bytes, cl_int* e) {
    bytes = bytes < 16 ? 16 : bytes;
    if (s.scratch_bytes[i] < bytes) {
      if (s.scratch[i]) clReleaseMemObject(s.scratch[i]);
      s.scratch[i] = clCreateBuffer(s.ctx, CL_MEM_READ_WRITE, bytes, nullptr, e);
      s.scratch_bytes[i] = *e == CL_SUCCESS ? bytes : 0;
      if (*e != CL_SUCCESS) s.scratch[i] = nullptr;
    }
    return s.scratch[i];
  }

  // Buffers of one call, released when it returns.
  struct Call {
    State& s;
    std::vector<cl_mem> mems;
    explicit Call(State& st) : s(st) {}
    ~Call() {  // an early error return must not leave commands running on the caller's memory
      clFinish(s.queue);
      for (cl_mem m : mems) clReleaseMemObject(m);
    }
    // A buffer over the caller's memory (a small device buffer when the tensor is empty).
    cl_mem wrap(void* data, size_t bytes, cl_mem_flags flags, cl_int* e) {
      cl_mem m = bytes == 0 ? clCreateBuffer(s.ctx, CL_MEM_READ_WRITE, 16, nullptr, e)
                            : clCreateBuffer(s.ctx, flags | CL_MEM_USE_HOST_PTR, bytes, data, e);
      if (*e == CL_SUCCESS) mems.push_back(m);
      return m;
    }
  };

  cl_int enqueue(cl_command_queue q, cl_kernel k, size_t global, size_t local, size_t rows = 0) {
    if (local > 0) global = (global + local - 1) / local * local;
    if (rows > 0) {  // 2-D: axis 0 along the row, one row per index of axis 1
      const size_t g[2] = {global, rows}, l[2] = {local, 1};
      return clEnqueueNDRangeKernel(q, k, 2, nullptr, g, local > 0 ? l : nullptr, 0, nullptr, nullptr);
    }
    return clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, local > 0 ? &local : nullptr, 0, nullptr, nullptr);
  }

  // Makes the device's writes to a USE_HOST_PTR buffer visible in host memory.
  cl_int sync_to_host(cl_command_queue q, cl_mem m, size_t bytes) {
    if (bytes == 0) return CL_SUCCESS;
    cl_int e = CL_SUCCESS;
    void* p = clEnqueueMapBuffer(q, m, CL_TRUE, CL_MAP_READ, 0, bytes, 0, nullptr, nullptr, &e);
    if (e != CL_SUCCESS) return e;
    return clEnqueueUnmapMemObject(q, m, p, 0, nullptr, nullptr);
  }
)CPP";

}  // namespace

std::string emit_host(const CheckedContract& c, const Settings& st, const Plan& p) {
  std::string h;
  h += "// host.cpp: runs the OpenCL kernels of operator '" + c.contract.name +
       "' behind the uniform CAKE C ABI.\n// Generated by CAKE's opencl track; the kernels are kernel.cl, "
       "embedded below.\n";
  h += "#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\n\n";
  h += "#include <algorithm>\n#include <cstdint>\n#include <cstring>\n#include <mutex>\n#include "
       "<string>\n#include <vector>\n\n";
  h += "#include \"cake_kernel_abi.h\"\n#include \"cake_prelude.h\"\n\nnamespace {\n\n";
  h += "const char kSource[] = R\"CAKECL(" + p.source + ")CAKECL\";\n\n";
  h += "constexpr int kKernels = " + std::to_string(p.kernels.size()) + ";\n";
  h += "const char* const kKernelNames[kKernels] = {";
  for (size_t i = 0; i < p.kernels.size(); ++i)
    h += (i ? ", " : "") + std::string("\"") + p.kernels[i].name + "\"";
  h += "};\n";
  std::vector<int> scratch_ids;
  for (size_t id = 0; id < c.tensors.size(); ++id)
    if (p.tensors[id].scratch) scratch_ids.push_back(static_cast<int>(id));
  h += "constexpr int kScratch = " + std::to_string(scratch_ids.size()) + ";\n";
  h += std::string("constexpr bool kWantF64 = ") + (st.acc_f64 ? "true" : "false") + ";\n";
  h += kHostSupport;
  h += "\n}  // namespace\n\n";
  h += "extern \"C\" int cake_run(const cake_tensor* in, int n_in, cake_tensor* out, int n_out, const "
       "double* params,\n"
       "                        int n_params) {\n";
  h += emit_abi_prologue(c);
  h += "  State& s = state();\n  std::call_once(s.once, [&] { init(s); });\n  if (!s.ok) return "
       "CAKE_ERR_DEVICE;\n";
  h += "  std::lock_guard<std::mutex> lock(s.mu);\n";
  h += "  Program* prog = program(s, op_dtype);\n  if (!prog) return CAKE_ERR_DEVICE;\n";
  h += "  Call call(s);\n  cl_int e = CL_SUCCESS;\n";
  h += "#define CK(x) do { e = (x); if (e != CL_SUCCESS) return CAKE_ERR_DEVICE; } while (0)\n";
  // Tensor buffers.
  std::vector<std::string> arg_mems;
  for (const auto& t : c.tensors) {
    if (t.role == TensorRole::Intermediate) continue;
    const bool input = t.role == TensorRole::Input;
    const std::string ab = input ? "in" : "out";
    h += "  const size_t bytes_" + t.name + " = (size_t)(" + numel(t) + ") * " + elem_bytes(t) + ";\n";
    h += "  cl_mem m_" + t.name + " = call.wrap(" +
         (input ? "const_cast<void*>(" + ab + "[" + std::to_string(t.index) + "].data)"
                : ab + "[" + std::to_string(t.index) + "].data") +
         ", bytes_" + t.name + ", " + (input ? "CL_MEM_READ_ONLY" : "CL_MEM_READ_WRITE") + ", &e);\n";
    h += "  if (e != CL_SUCCESS) return CAKE_ERR_DEVICE;\n";
    arg_mems.push_back("m_" + t.name);
  }
  for (size_t k = 0; k < scratch_ids.size(); ++k) {
    const TensorInfo& t = c.tensors[static_cast<size_t>(scratch_ids[k])];
    const std::string& ty = p.tensors[static_cast<size_t>(scratch_ids[k])].scratch_type;
    const std::string sz = ty == "float" ? "4" : ty == "long" ? "8" : "(s.f64 ? 8 : 4)";
    h += "  const size_t wbytes_" + t.name + " = (size_t)(" + numel(t) + ") * " + sz + ";\n";
    h += "  cl_mem w_" + t.name + " = scratch(s, " + std::to_string(k) + ", wbytes_" + t.name + ", &e);\n";
    h += "  if (e != CL_SUCCESS) return CAKE_ERR_DEVICE;\n";
    arg_mems.push_back("w_" + t.name);
    if (p.tensors[static_cast<size_t>(scratch_ids[k])].accumulated) {
      h += "  { const cl_uchar zero = 0; CK(clEnqueueFillBuffer(s.queue, w_" + t.name +
           ", &zero, 1, 0, wbytes_" + t.name + ", 0, nullptr, nullptr)); }\n";
    }
  }
  arg_mems.push_back("s.err");
  h += "  { static const cl_int zero = 0; CK(clEnqueueWriteBuffer(s.queue, s.err, CL_TRUE, 0, sizeof zero, "
       "&zero, 0, "
       "nullptr, nullptr)); }\n";
  // Arguments: the same list for every kernel.
  h += "  for (int k = 0; k < kKernels; ++k) {\n    cl_kernel kk = prog->k[k];\n    cl_uint a = 0;\n";
  for (const auto& m : arg_mems) h += "    CK(clSetKernelArg(kk, a++, sizeof(cl_mem), &" + m + "));\n";
  for (const auto& z : c.sizes) {
    h += "    { const cl_long v = (cl_long)" + size_id(z.name) +
         "; CK(clSetKernelArg(kk, a++, sizeof v, &v)); }\n";
  }
  for (const auto& prm : c.contract.params) {
    h += "    { const cl_float v = (cl_float)" + param_id(prm.name) +
         "; CK(clSetKernelArg(kk, a++, sizeof v, &v)); }\n";
  }
  h += "  }\n";
  // Enqueue in statement order.
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelPlan& k = p.kernels[i];
    const std::string ki = "prog->k[" + std::to_string(i) + "]";
    if (k.kind == KernelPlan::MapWg) continue;  // enqueued with its Map kernel
    h += "  {  // " + k.name + "\n    const int64_t items = " + k.items + ";\n";
    if (!k.rows.empty()) h += "    const int64_t rows = " + k.rows + ";\n";
    h += std::string("    if (items > 0") + (k.rows.empty() ? "" : " && rows > 0") + ") {\n";
    const bool wg_next = i + 1 < p.kernels.size() && p.kernels[i + 1].kind == KernelPlan::MapWg;
    const std::string local = std::to_string(st.wg);
    if (k.kind == KernelPlan::Map) {
      std::string rows = k.rows.empty() ? "" : ", (size_t)rows";
      std::string serial = "enqueue(s.queue, ";
      serial += ki;
      serial += ", (size_t)((items + ";
      serial += std::to_string(st.ipw - 1);
      serial += ") / ";
      serial += std::to_string(st.ipw);
      serial += "), ";
      serial += local;
      serial += rows;
      serial += ")";
      const std::string all = k.rows.empty() ? "items" : "items * rows";
      if (wg_next) {
        const KernelPlan& w = p.kernels[i + 1];
        std::string use = st.local_reduce == "on"
                              ? "true"
                              : "(" + w.red_len + ") >= " + std::to_string(st.reduce_min) + " && (" + all +
                                    ") <= " + std::to_string(kWgMaxPoints);
        h += "      const bool use_wg = " + use + ";\n";
        h += "      if (use_wg) CK(enqueue(s.queue, prog->k[" + std::to_string(i + 1) + "], (size_t)(" + all +
             ") * " + std::to_string(w.group) + ", " + std::to_string(w.group) + "));\n";
        h += "      else CK(" + serial + ");\n";
      } else {
        h += "      CK(" + serial + ");\n";
      }
    } else if (k.kind == KernelPlan::Scatter) {
      h += "      CK(enqueue(s.queue, ";
      h += ki;
      h += ", (size_t)items, ";
      h += local;
      h += "));\n";
    } else {
      h += "      CK(enqueue(s.queue, " + ki + ", (size_t)items, 0));\n";
    }
    h += "    }\n  }\n";
  }
  h += "  CK(clFinish(s.queue));\n";
  h += "  cl_int bad = 0;\n  CK(clEnqueueReadBuffer(s.queue, s.err, CL_TRUE, 0, sizeof bad, &bad, 0, "
       "nullptr, nullptr));\n";
  for (const auto& t : c.tensors) {
    if (t.role == TensorRole::Output)
      h += "  CK(sync_to_host(s.queue, m_" + t.name + ", bytes_" + t.name + "));\n";
  }
  h += "  CK(clFinish(s.queue));\n#undef CK\n  return bad ? CAKE_ERR_INDEX : CAKE_OK;\n}\n";
  return h;
}

}  // namespace opencl

Feasibility OpenclTrack::feasible(const CheckedContract& c, const target::MachineInfo& m) const {
  const target::Lane* lane = nullptr;
  for (const auto& l : m.lanes)
    if (l.name == "opencl") lane = &l;
  if (!lane) return Feasibility::no("the machine description has no opencl lane");
  if (!lane->admitted) return Feasibility::no("the opencl lane is not admitted: " + lane->detail);
  for (DType d : c.contract.dtypes) {
    if (d != DType::f32 && d != DType::f16 && d != DType::bf16) {
      return Feasibility::no("operator dtype " + std::string(dtype_name(d)) +
                             ": the opencl track builds f32, f16 and bf16 operators only");
    }
  }
  for (const auto& t : c.tensors)
    if (t.dims.size() > CAKE_MAX_RANK) return Feasibility::no("tensor '" + t.name + "' has rank above 8");
  try {
    opencl::Settings s;
    opencl::Plan p = opencl::plan_kernels(c, s);
    (void)opencl::emit_host(c, s, p);
  } catch (const std::exception& e) {
    return Feasibility::no(std::string("not lowered: ") + e.what());
  }
  return Feasibility::yes();
}

KnobSpace OpenclTrack::knobs(const CheckedContract& c, const target::MachineInfo& m) const {
  KnobSpace k;
  k.add_int("wg", {0, 16, 32, 64, 128, 256}, 0,
            "work-group size of the per-element kernels (0: the OpenCL runtime chooses)");
  k.add_int("ipw", {1, 2, 4, 8}, 1,
            "output elements per work-item (grid-strided, so neighbours stay adjacent)");
  bool reduces = false;
  for (const auto& s : c.contract.compute) reduces |= te::contains(*s.rhs, te::ExprKind::Reduce);
  if (reduces) {
    k.add_choice(
        "local_reduce", {"off", "on", "auto"}, "auto",
        "reductions with host-sized ranges: one work-group per output element with a local-memory tree "
        "reduction (auto: when the reduction is at least reduce_min long and the statement has at most 16384 "
        "output elements)");
    k.add_int("reduce_wg", {16, 32, 64, 128, 256}, 64, "work-group size of the tree reduction");
    k.add_int("reduce_min", {64, 256, 1024, 4096}, 256,
              "local_reduce=auto: the shortest reduction done per work-group");
  }
  const bool accumulates = std::any_of(c.contract.compute.begin(), c.contract.compute.end(),
                                       [](const te::Stmt& s) { return s.accumulate; });
  // f32 loses the reference's f64 result where a later stage cancels (layer_norm's + b): contracts of
  // several statements compute in f64 by default; one-statement reductions accumulate in f64.
  const bool multi = c.contract.compute.size() > 1;
  k.add_choice("compute", {"f32", "mixed", "f64"},
               multi                      ? "f64"
               : (reduces || accumulates) ? "mixed"
                                          : "f32",
               "float arithmetic: f32 everywhere; mixed: reductions and '+=' accumulate in f64; f64: every "
               "operation and intermediate in f64 (f64 only where the device has cl_khr_fp64)");
  return k;
}

Artifact OpenclTrack::lower(const CheckedContract& c, const target::MachineInfo& m,
                            const Knobs& knobs) const {
  const KnobSpace space = this->knobs(c, m);
  const Knobs k = space.resolve(knobs);
  opencl::Settings s;
  s.wg = static_cast<int>(k.integer("wg"));
  s.ipw = static_cast<int>(k.integer("ipw"));
  if (k.has("local_reduce")) {
    s.local_reduce = k.choice("local_reduce");
    s.reduce_wg = static_cast<int>(k.integer("reduce_wg"));
    s.reduce_min = static_cast<int>(k.integer("reduce_min"));
  } else {
    s.local_reduce = "off";
  }
  s.acc_f64 = k.choice("compute") != "f32";
  s.all_acc = k.choice("compute") == "f64";
  const opencl::Plan plan = opencl::plan_kernels(c, s);

  Artifact a;
  a.track = std::string(name());
  a.op = c.contract.name;
  a.contract_hash = c.hash;
  a.knobs = k;
  a.files.push_back({"kernel.cl", plan.source});
  a.files.push_back({"host.cpp", opencl::emit_host(c, s, plan)});
  for (auto& f : prelude_files()) a.files.push_back(std::move(f));
  std::string ios;
  for (DType d : c.contract.dtypes) ios += (ios.empty() ? "" : ",") + std::to_string(static_cast<int>(d));
  BuildStep check{{opencl::oclc_path(), "kernel.cl", "--io", ios}, "check"};
  if (s.acc_f64) check.argv.push_back("--f64");
  a.steps.push_back(std::move(check));
  a.steps.push_back(
      {{"g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-I.", "host.cpp", "-o", "kernel.so", "-lOpenCL"},
       "link"});
  a.library = "kernel.so";
  a.main_file = "kernel.cl";
  return a;
}

const Track& opencl_track() {
  static const OpenclTrack t;
  return t;
}

}  // namespace cake::tracks
