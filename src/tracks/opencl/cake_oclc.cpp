// cake-oclc: the opencl track's offline check of a generated kernel.cl. Builds the file with the OpenCL
// runtime (clBuildProgram, on the device the generated host uses) once per I/O dtype, with the same
// options the host passes (so PoCL's kernel cache is warm afterwards), and prints the compiler's log with
// the source name rewritten to the file's, as gcc-style `kernel.cl:LINE:COL: error: message` lines.
// Exit status: 0 built, 1 a build failed, 2 usage or no OpenCL device.
//   cake-oclc kernel.cl --io 0,2 [--f64]
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

bool has_extension(cl_device_id d, const char* ext) {
  size_t n = 0;
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, nullptr, &n) != CL_SUCCESS || n == 0) return false;
  std::string s(n, '\0');
  if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, &s[0], nullptr) != CL_SUCCESS) return false;
  return s.find(ext) != std::string::npos;
}

// Rewrites the runtime's name for the source ("<source>", "input.cl", a temporary path) to `file`.
std::string rewrite_line(const std::string& line, const std::string& file) {
  static const char* const kNames[] = {"<source>", "<stdin>", "input.cl"};
  for (const char* n : kNames) {
    const std::string name = n;
    if (line.compare(0, name.size(), name) == 0 && line.size() > name.size() && line[name.size()] == ':')
      return file + line.substr(name.size());
  }
  // PoCL: "error: /root/.cache/pocl/kcache/tempfile_X.cl:26:8: message" -> "FILE:26:8: error: message".
  for (const char* sev : {"fatal error", "error", "warning", "note"}) {
    const std::string prefix = std::string(sev) + ": ";
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t pos = line.find(".cl:", prefix.size());
    if (pos == std::string::npos) break;
    // FILE.cl:LINE:COL: rest
    size_t p = pos + 4, q = p;
    while (q < line.size() && std::isdigit(static_cast<unsigned char>(line[q]))) ++q;
    if (q == p || q >= line.size() || line[q] != ':') break;
    size_t r = q + 1, t = r;
    while (t < line.size() && std::isdigit(static_cast<unsigned char>(line[t]))) ++t;
    std::string where = line.substr(p, q - p);
    if (t > r && t < line.size() && line[t] == ':') {
      where += ":" + line.substr(r, t - r);
      q = t;
    } else {
      where += ":1";
    }
    std::string msg = line.substr(q + 1);
    while (!msg.empty() && msg.front() == ' ') msg.erase(msg.begin());
    std::string out = file;
    out += ":";
    out += where;
    out += ": ";
    out += sev;
    out += ": ";
    out += msg;
    return out;
  }
  // A path ending in .cl followed by :LINE:COL: (clang's own format).
  const size_t pos = line.find(".cl:");
  if (pos != std::string::npos && line.find(' ') > pos && pos + 4 < line.size() &&
      std::isdigit(static_cast<unsigned char>(line[pos + 4])))
    return file + line.substr(pos + 3);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  std::vector<int> ios;
  bool want_f64 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--io" && i + 1 < argc) {
      std::stringstream ss(argv[++i]);
      std::string item;
      while (std::getline(ss, item, ',')) ios.push_back(std::stoi(item));
    } else if (a == "--f64") {
      want_f64 = true;
    } else if (file.empty()) {
      file = a;
    } else {
      std::cerr << "cake-oclc: error: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  if (file.empty()) {
    std::cerr << "usage: cake-oclc FILE.cl [--io 0,1,2] [--f64]\n";
    return 2;
  }
  if (ios.empty()) ios.push_back(0);
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::cerr << "cake-oclc: error: cannot read " << file << "\n";
    return 2;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string source = buf.str();

  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
    std::cerr << "cake-oclc: error: no OpenCL platform\n";
    return 2;
  }
  std::vector<cl_platform_id> ps(np);
  clGetPlatformIDs(np, ps.data(), nullptr);
  cl_device_id dev = nullptr;
  for (cl_platform_id p : ps) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &dev, &nd) == CL_SUCCESS && nd > 0) break;
    dev = nullptr;
  }
  if (!dev) {
    std::cerr << "cake-oclc: error: no OpenCL device\n";
    return 2;
  }
  cl_int e = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &e);
  if (e != CL_SUCCESS) {
    std::cerr << "cake-oclc: error: clCreateContext failed (" << e << ")\n";
    return 2;
  }
  const bool f64 = want_f64 && has_extension(dev, "cl_khr_fp64");
  int status = 0;
  std::set<std::string> printed;  // the same message from several dtype builds is printed once
  for (int io : ios) {
    const char* src = source.c_str();
    const size_t len = source.size();
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, &len, &e);
    if (e != CL_SUCCESS) {
      std::cerr << "cake-oclc: error: clCreateProgramWithSource failed (" << e << ")\n";
      return 2;
    }
    const std::string opts = "-DCAKE_IO=" + std::to_string(io) + " -DCAKE_ACC_F64=" + (f64 ? "1" : "0");
    const cl_int rc = clBuildProgram(prog, 1, &dev, opts.c_str(), nullptr, nullptr);
    size_t n = 0;
    clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    if (n) clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, &log[0], nullptr);
    std::stringstream ls(log);
    std::string line;
    while (std::getline(ls, line)) {
      if (!line.empty() && line.back() == '\0') line.pop_back();
      if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
      const std::string out = rewrite_line(line, file);
      if (printed.insert(out).second) std::cout << out << "\n";
    }
    if (rc != CL_SUCCESS) {
      std::string what = file;
      what += ":1:1: error: OpenCL build failed for ";
      what += opts;
      what += " (clBuildProgram returned ";
      what += std::to_string(rc);
      what += ")";
      if (printed.empty() || rc != CL_BUILD_PROGRAM_FAILURE) std::cout << what << "\n";
      status = 1;
    }
    clReleaseProgram(prog);
    if (status) break;
  }
  clReleaseContext(ctx);
  std::cout.flush();
  return status;
}
