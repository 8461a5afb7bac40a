// Lane detection: which execution lanes (cpu, opencl, cuda, ascend) this machine admits, probing the
// OpenCL ICD and the CUDA driver through dlopen so that neither is a link-time dependency.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "target/machine.h"

namespace cake::target {

namespace {

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown dlopen error";
}

// Loaded once and never closed: ICDs and drivers register exit handlers that must stay mapped.
void* open_library(const char* name, std::string* why) {
  dlerror();
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) *why = dl_error();
  return h;
}

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

// ---- OpenCL (types and constants from the Khronos headers, declared here to avoid a build dependency)
using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_platform_id = struct cl_platform_opaque*;
using cl_device_id = struct cl_device_opaque*;
constexpr uint64_t kClDeviceTypeAll = 0xFFFFFFFFu;
constexpr cl_uint kClPlatformName = 0x0902;
constexpr cl_uint kClDeviceName = 0x102B;

using clGetPlatformIDs_t = cl_int (*)(cl_uint, cl_platform_id*, cl_uint*);
using clGetPlatformInfo_t = cl_int (*)(cl_platform_id, cl_uint, size_t, void*, size_t*);
using clGetDeviceIDs_t = cl_int (*)(cl_platform_id, uint64_t, cl_uint, cl_device_id*, cl_uint*);
using clGetDeviceInfo_t = cl_int (*)(cl_device_id, cl_uint, size_t, void*, size_t*);

template <typename Handle, typename F>
std::string info_string(F get, Handle h, cl_uint what) {
  size_t size = 0;
  if (get(h, what, 0, nullptr, &size) != 0 || size == 0) return "?";
  std::string s(size, '\0');
  if (get(h, what, size, s.data(), nullptr) != 0) return "?";
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  return s;
}

Lane opencl_lane() {
  Lane lane{"opencl", false, ""};
  std::string why;
  void* lib = open_library("libOpenCL.so.1", &why);
  if (!lib) {
    lane.detail = "libOpenCL.so.1 not loadable: " + why;
    return lane;
  }
  auto get_platforms = symbol<clGetPlatformIDs_t>(lib, "clGetPlatformIDs");
  auto platform_info = symbol<clGetPlatformInfo_t>(lib, "clGetPlatformInfo");
  auto get_devices = symbol<clGetDeviceIDs_t>(lib, "clGetDeviceIDs");
  auto device_info = symbol<clGetDeviceInfo_t>(lib, "clGetDeviceInfo");
  if (!get_platforms || !platform_info || !get_devices || !device_info) {
    lane.detail = "libOpenCL.so.1 lacks the OpenCL 1.x platform/device query functions";
    return lane;
  }
  cl_uint n_platforms = 0;
  const cl_int rc = get_platforms(0, nullptr, &n_platforms);
  if (rc != 0 || n_platforms == 0) {
    lane.detail = "no OpenCL platform (ICD loader found no vendor driver; clGetPlatformIDs returned " +
                  std::to_string(rc) + ")";
    return lane;
  }
  std::vector<cl_platform_id> platforms(n_platforms);
  if (get_platforms(n_platforms, platforms.data(), nullptr) != 0) {
    lane.detail = "clGetPlatformIDs failed";
    return lane;
  }
  std::string found;
  int n_devices_total = 0;
  for (cl_platform_id p : platforms) {
    cl_uint n_devices = 0;
    if (get_devices(p, kClDeviceTypeAll, 0, nullptr, &n_devices) != 0 || n_devices == 0) continue;
    std::vector<cl_device_id> devices(n_devices);
    if (get_devices(p, kClDeviceTypeAll, n_devices, devices.data(), nullptr) != 0) continue;
    if (!found.empty()) found += "; ";
    found += info_string(platform_info, p, kClPlatformName) + ": ";
    for (cl_uint i = 0; i < n_devices; ++i) {
      if (i) found += ", ";
      found += info_string(device_info, devices[i], kClDeviceName);
    }
    n_devices_total += int(n_devices);
  }
  if (n_devices_total == 0) {
    lane.detail = std::to_string(n_platforms) + " OpenCL platform(s) but no device";
    return lane;
  }
  lane.admitted = true;
  lane.detail = found;
  return lane;
}

// ---- CUDA
std::string find_on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  std::string all = path;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t end = std::min(all.find(':', start), all.size());
    std::string dir = all.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + exe;
    struct stat st{};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return {};
}

using cuInit_t = int (*)(unsigned);
using cuDeviceGetCount_t = int (*)(int*);
using cuDeviceGet_t = int (*)(int*, int);
using cuDeviceGetName_t = int (*)(char*, int, int);

Lane cuda_lane() {
  Lane lane{"cuda", false, ""};
  const std::string nvcc = find_on_path("nvcc");
  if (nvcc.empty()) {
    lane.detail = "nvcc not on PATH";
    return lane;
  }
  std::string why;
  void* lib = open_library("libcuda.so.1", &why);
  if (!lib) {
    lane.detail = "libcuda.so.1 (CUDA driver) not loadable: " + why + " (nvcc at " + nvcc + ")";
    return lane;
  }
  auto init = symbol<cuInit_t>(lib, "cuInit");
  auto count = symbol<cuDeviceGetCount_t>(lib, "cuDeviceGetCount");
  auto get = symbol<cuDeviceGet_t>(lib, "cuDeviceGet");
  auto name = symbol<cuDeviceGetName_t>(lib, "cuDeviceGetName");
  if (!init || !count) {
    lane.detail = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
    return lane;
  }
  if (const int rc = init(0); rc != 0) {
    lane.detail = "cuInit failed (CUresult " + std::to_string(rc) + ")";
    return lane;
  }
  int n = 0;
  if (const int rc = count(&n); rc != 0 || n <= 0) {
    lane.detail = rc != 0 ? "cuDeviceGetCount failed (CUresult " + std::to_string(rc) + ")" : "no CUDA device";
    return lane;
  }
  std::string names;
  for (int i = 0; i < n; ++i) {
    char buf[256] = {};
    int dev = 0;
    if (i) names += ", ";
    if (get && name && get(&dev, i) == 0 && name(buf, sizeof buf - 1, dev) == 0)
      names += buf;
    else
      names += "device " + std::to_string(i);
  }
  lane.admitted = true;
  lane.detail = names + " (nvcc at " + nvcc + ")";
  return lane;
}

// ---- Ascend (CANN)
Lane ascend_lane() {
  Lane lane{"ascend", false, ""};
  const char* home = std::getenv("ASCEND_HOME_PATH");
  if (!home || !*home) {
    lane.detail = "ASCEND_HOME_PATH not set (no CANN toolkit)";
    return lane;
  }
  struct stat st{};
  if (stat(home, &st) != 0 || !S_ISDIR(st.st_mode)) {
    lane.detail = std::string("ASCEND_HOME_PATH=") + home + " is not a directory";
    return lane;
  }
  lane.admitted = true;
  lane.detail = std::string("CANN at ") + home + " (NPU presence not verified)";
  return lane;
}

}  // namespace

std::vector<Lane> detect_lanes() {
  return {Lane{"cpu", true, detect_isa().level()}, opencl_lane(), cuda_lane(), ascend_lane()};
}

}  // namespace cake::target
