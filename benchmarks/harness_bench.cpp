// The CAKE-Bench harness's own cost per case: one sandboxed correctness run (exec of cake-runner,
// contract check, inputs, guard-paged outputs, input hash, late-write windows, the re-verification run,
// the reference from its cache and the gates in the parent) against the same kernel called in-process on
// the same case. overhead_ms = sandboxed − in-process. Run: build/benchmarks/harness_bench.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "build/build_service.h"
#include "build/kernel.h"
#include "cases/cases.h"
#include "contract/contract.h"
#include "eval/sandbox.h"
#include "reference/reference.h"
#include "target/machine.h"
#include "tracks/track.h"

namespace {

using namespace cake;

struct Fixture {
  std::string file;
  CheckedContract c;
  cases::Case k;
  build::BuildResult built;
};

Fixture& fixture(const std::map<std::string, int64_t>& sizes) {
  static std::map<std::map<std::string, int64_t>, std::unique_ptr<Fixture>> all;
  auto& f = all[sizes];
  if (!f) {
    f = std::make_unique<Fixture>();
    f->file = (std::filesystem::path(CAKE_SOURCE_DIR) / "bench/ops/add.yaml").string();
    f->c = load_and_check(f->file);
    f->k = cases::make_case(f->c, sizes, DType::f32);
    f->built = build::build(tracks::find_track("simd")->lower(f->c, target::describe_machine(), {}));
    reference::cached_outputs(f->c, f->k);  // warm the reference cache as a repeated bench finds it
  }
  return *f;
}

void sandboxed(benchmark::State& st, int64_t n) {
  Fixture& f = fixture({{"M", 4}, {"N", n}});
  for (auto _ : st) {
    const eval::CaseRun r = eval::run_sandboxed(f.built.library, f.file, f.k);
    if (r.verdict != eval::Verdict::Pass) st.SkipWithError(r.detail.c_str());
  }
}

void in_process(benchmark::State& st, int64_t n) {
  Fixture& f = fixture({{"M", 4}, {"N", n}});
  const build::Kernel k(f.built.library);
  const std::vector<Tensor> in = cases::make_inputs(f.c, f.k);
  std::vector<Tensor> out = cases::make_outputs(f.c, f.k);
  const std::vector<double> p = cases::kernel_params(f.c, f.k);
  for (auto _ : st) benchmark::DoNotOptimize(k.run(in, out, p));
}

}  // namespace

BENCHMARK_CAPTURE(sandboxed, add_4x256, 256)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK_CAPTURE(in_process, add_4x256, 256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(sandboxed, add_4x65536, 65536)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK_CAPTURE(in_process, add_4x65536, 65536)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
