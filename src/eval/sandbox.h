// The CAKE-Bench sandboxed runner (DESIGN §6): runs a kernel CAKE does not trust on one case in a fresh
// exec'd child process (cake-runner) with guard pages after every output, NaN-filled outputs, an input
// hash, a late-write window, a re-verification run on fresh inputs, a memory limit and a wall-clock
// limit, and turns what happened into one Verdict. The parent computes the reference and applies the
// precision gate itself; the child's word is trusted only for what the parent cannot check (signal,
// status, input mutation, timing).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cases/cases.h"
#include "eval/precision.h"
#include "eval/timing.h"

namespace cake::eval {

enum class Verdict {
  Pass,
  CompileError,
  Crash,
  Timeout,
  OutOfMemory,
  KernelError,
  NoOutput,
  WrongResult,
  InputMutated,
  StaleResult,
  OutOfBoundsWrite,
  LateWrite,
  HarnessError
};
// "pass", "compile-error", "crash", "timeout", "out-of-memory", "kernel-error", "no-output",
// "wrong-result", "input-mutated", "stale-result", "out-of-bounds-write", "late-write", "harness-error"
std::string_view verdict_name(Verdict v);

struct SandboxOptions {
  double wall_seconds = 60;  // per case, the whole child (SIGKILL of its process group after)
  int64_t memory_bytes = 0;  // RLIMIT_AS for the child; 0 = 4 x case bytes + 2 GiB
  bool time_it = false;      // also time the kernel (eval::time_calls) after the correctness run
  TimingOptions timing;
  // Timing cache state: when set and the case is memory-bound (under 4 flops per byte) and its inputs
  // are at least 1 MiB, repetitions rotate over a pool of input sets whose inputs total more than
  // 64 MiB (each call starts with its inputs out of the last-level cache); otherwise every call reuses
  // the same inputs (warm cache). Outputs are always the same preallocated, touched buffers.
  bool rotate = true;
  int threads = 0;  // OMP_NUM_THREADS for the child; 0 = all usable cores
};

struct CaseRun {
  Verdict verdict = Verdict::HarnessError;
  std::string detail;             // one line: signal, status, worst element, which input changed, ...
  std::vector<GateResult> gates;  // per output, for the correctness run (empty when it did not get that far)
  std::optional<Timing> timing;   // when time_it and the case passed
  int timing_input_sets = 0;      // input sets the timing rotated over (1: the same inputs every call)
  double wall_seconds = 0;        // the whole call, child and reference
};

// Runs `library` (exports cake_run) on case k of contract file `contract_file` in a child process.
// Never throws for anything the kernel does; HarnessError when the harness itself could not run.
// Safe to call from several threads at once (each call has its own directory and process group).
// In the child, run 1 (the case's inputs), then the timing (when time_it), then the re-verification run on
// inputs from reverify_seed(k): re-verification comes after timing (DESIGN §6). Each output's data ends
// exactly at a page boundary, so it is aligned only to its element size: kernels must not assume
// 16- or 64-byte-aligned outputs (an aligned store there faults and is judged a crash).
// The timing is done even when the outputs turn out wrong (the child cannot judge them); it is then
// not reported.
CaseRun run_sandboxed(const std::filesystem::path& library, const std::string& contract_file,
                      const cases::Case& k, const SandboxOptions& o = {});

// The seed of the re-verification inputs of a case (another seed than k.seed, same shapes).
uint64_t reverify_seed(const cases::Case& k);

// The cake-runner program run_sandboxed starts: $CAKE_RUNNER, else the one this build made.
std::filesystem::path runner_path();

}  // namespace cake::eval
