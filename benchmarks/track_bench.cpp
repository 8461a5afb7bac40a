// Default-knob kernels of every feasible track, measured against the machine and against peers in the
// same run (Google Benchmark, manual timing of each call):
//   * memory-bound operators (add, gelu, softmax, rms_norm, layer_norm) on their largest standard case in
//     f32: achieved GB/s of compulsory traffic (inputs read once, outputs written once) and its fraction
//     of the all-core STREAM-triad bandwidth, measured by `cake doctor`'s triad at the start of this run
//     (`of_triad`; the doctor's cached figure is printed in the context);
//   * matmul f32 1024³: GFLOP/s, and the ratio to OpenBLAS (cblas_sgemm) and oneDNN (matmul primitive)
//     measured in this process with the same thread count (`vs_openblas`, `vs_onednn`: against the
//     peer's best repetition).
// Inputs and outputs are allocated and touched once and reused by every call (first touch of fresh
// pages is very slow here); each kernel runs once untimed first. Cache state between calls is whatever
// the previous call left: the memory-bound cases are 2-8x the last-level cache, so they stream from DRAM.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <dnnl.hpp>
#include <filesystem>
#include <map>
#include <memory>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace {

using namespace cake;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::map<std::string, double> g_peer_gflops;  // best repetition of each matmul peer in this run

struct Prepared {
  std::shared_ptr<CheckedContract> c;
  cases::Case k;
  std::vector<Tensor> in, out;
  std::vector<double> params;
  double bytes = 0, flops = 0;
};

std::shared_ptr<Prepared> prepare(const std::string& op, const std::map<std::string, int64_t>* free) {
  auto p = std::make_shared<Prepared>();
  p->c = std::make_shared<CheckedContract>(
      load_and_check((fs::path(CAKE_SOURCE_DIR) / "bench/ops" / (op + ".yaml")).string()));
  if (free) {
    p->k = cases::make_case(*p->c, *free, DType::f32);
  } else {  // the largest standard shape, in f32
    double best = -1;
    for (const cases::Case& k : cases::make_cases(*p->c, cases::Set::Standard)) {
      const double b = cases::case_bytes(*p->c, k);
      if (b > best) {
        best = b;
        p->k = cases::make_case(*p->c, k.free, DType::f32);
      }
    }
  }
  p->in = cases::make_inputs(*p->c, p->k);
  p->out = cases::make_outputs(*p->c, p->k);
  p->params = cases::kernel_params(*p->c, p->k);
  p->bytes = cases::case_bytes(*p->c, p->k);
  p->flops = cases::case_flops(*p->c, p->k);
  return p;
}

// Times f() per iteration; returns the seconds of the fastest call and sets the manual times.
template <class F>
void timed_loop(benchmark::State& st, F&& f, double& total) {
  f();  // untimed: first touch of scratch, lazy initialisation
  total = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    f();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(s);
    total += s;
  }
}

void bench_kernel(benchmark::State& st, std::shared_ptr<build::Kernel> kern, std::shared_ptr<Prepared> p,
                  double triad_gbs, bool matmul) {
  double total = 0;
  int status = 0;
  timed_loop(
      st, [&] { status = kern->run(p->in, p->out, p->params); }, total);
  if (status != 0) {
    st.SkipWithError(("kernel returned status " + std::to_string(status)).c_str());
    return;
  }
  const double per = total / static_cast<double>(st.iterations());
  st.counters["GB/s"] = p->bytes / per / 1e9;
  st.counters["of_triad"] = p->bytes / per / 1e9 / triad_gbs;
  if (matmul) {
    const double gf = 2.0 * 1024 * 1024 * 1024 / per / 1e9;
    st.counters["GFLOP/s"] = gf;
    for (const auto& [peer, pg] : g_peer_gflops) st.counters["vs_" + peer] = gf / pg;
  }
}

void note_peer(const std::string& name, double gf) {
  double& best = g_peer_gflops[name];
  best = std::max(best, gf);
}

void bench_openblas(benchmark::State& st, std::shared_ptr<Prepared> p, int threads) {
  openblas_set_num_threads(threads);
  const int n = 1024;
  const float* a = static_cast<const float*>(p->in[0].data());
  const float* b = static_cast<const float*>(p->in[1].data());
  float* c = static_cast<float*>(p->out[0].data());
  double total = 0;
  timed_loop(
      st,
      [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); },
      total);
  const double gf = 2.0 * n * n * n / (total / static_cast<double>(st.iterations())) / 1e9;
  st.counters["GFLOP/s"] = gf;
  note_peer("openblas", gf);
}

void bench_onednn(benchmark::State& st, std::shared_ptr<Prepared> p, int threads) {
  omp_set_num_threads(threads);
  using namespace dnnl;
  const memory::dim n = 1024;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const memory::desc md({n, n}, memory::data_type::f32, memory::format_tag::ab);
  memory A(md, eng, p->in[0].data()), B(md, eng, p->in[1].data()), C(md, eng, p->out[0].data());
  const matmul prim(matmul::primitive_desc(matmul::desc(md, md, md), eng));
  double total = 0;
  timed_loop(
      st,
      [&] {
        prim.execute(s, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, C}});
        s.wait();
      },
      total);
  const double gf = 2.0 * n * n * n / (total / static_cast<double>(st.iterations())) / 1e9;
  st.counters["GFLOP/s"] = gf;
  note_peer("onednn", gf);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Our own flags, after Google Benchmark's: --knob=name=value (repeatable) applies to every track whose
  // knob space has that knob, so a variant can be measured against the defaults' figures in another run.
  tracks::Knobs extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=', 7);
    if (a.rfind("--knob=", 0) == 0 && eq != std::string::npos) {
      extra.set(a.substr(7, eq - 7), a.substr(eq + 1));
    } else {
      std::fprintf(stderr,
                   "track_bench: unknown argument %s (use --knob=name=value or Google Benchmark's flags)\n",
                   a.c_str());
      return 2;
    }
  }
  const target::MachineInfo m = target::describe_machine();
  const int threads = m.logical_cores;
  // The bandwidth the memory-bound figures are divided by is measured now, in this run (the machine's
  // bandwidth drifts; the doctor's cached figure is reported beside it).
  const double triad_now = target::measure_triad_gbs(threads);
  benchmark::AddCustomContext("cake.triad_gbs_this_run", std::to_string(triad_now));
  benchmark::AddCustomContext("cake.triad_gbs_doctor", std::to_string(m.bandwidth_gbs));
  benchmark::AddCustomContext("cake.fma_gflops", std::to_string(m.fma_gflops));
  benchmark::AddCustomContext("cake.threads", std::to_string(threads));
  benchmark::AddCustomContext("cake.isa", m.isa.level());
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("openblas.coretype", core ? core : "(autodetect)");
  benchmark::AddCustomContext(
      "onednn.version", std::to_string(dnnl_version()->major) + "." + std::to_string(dnnl_version()->minor));

  const std::map<std::string, int64_t> mm{{"M", 1024}, {"N", 1024}, {"K", 1024}};
  auto mm_case = prepare("matmul", &mm);
  benchmark::RegisterBenchmark("matmul_1024/peer:openblas", bench_openblas, mm_case, threads)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Repetitions(3);
  benchmark::RegisterBenchmark("matmul_1024/peer:onednn", bench_onednn, mm_case, threads)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Repetitions(3);

  // Lower and build every (operator, track) pair first, in parallel; then register what built.
  struct Job {
    std::string op, track;
    std::shared_ptr<Prepared> p;
    bool matmul;
  };
  std::vector<Job> jobs;
  std::vector<tracks::Artifact> arts;
  for (const std::string op : {"add", "gelu", "softmax", "rms_norm", "layer_norm", "matmul"}) {
    const bool is_mm = op == "matmul";
    auto p = is_mm ? mm_case : prepare(op, nullptr);
    for (const tracks::Track* t : tracks::all_tracks()) {
      const tracks::Feasibility f = t->feasible(*p->c, m);
      if (!f.ok) {
        std::fprintf(stderr, "%s/%s: infeasible: %s\n", op.c_str(), std::string(t->name()).c_str(),
                     f.reason.c_str());
        continue;
      }
      tracks::Knobs k;
      const tracks::KnobSpace space = t->knobs(*p->c, m);
      for (const auto& [name, value] : extra.values())
        if (space.find(name)) k.set(name, value);
      jobs.push_back({op, std::string(t->name()), p, is_mm});
      arts.push_back(t->lower(*p->c, m, k));
    }
  }
  build::BuildOptions bo;
  bo.progress = [](std::string_view s) {
    std::fprintf(stderr, "build %.*s\n", static_cast<int>(s.size()), s.data());
  };
  const std::vector<build::BuildResult> built = build::build_all(arts, bo);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!built[i].ok()) {
      std::fprintf(stderr, "%s/%s: build failed: %s\n", jobs[i].op.c_str(), jobs[i].track.c_str(),
                   built[i].failure.c_str());
      continue;
    }
    auto kern = std::make_shared<build::Kernel>(built[i].library);
    const std::string name =
        (jobs[i].matmul ? std::string("matmul_1024") : jobs[i].op + "/" + jobs[i].p->k.describe()) +
        "/track:" + jobs[i].track;
    benchmark::RegisterBenchmark(name.c_str(), bench_kernel, kern, jobs[i].p, triad_now, jobs[i].matmul)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(3);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
