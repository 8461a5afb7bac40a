// Timing by the harness (DESIGN §6): warm-up calls, then repetitions until both a minimum total time
// and a minimum count are reached; median, min and the spread (median absolute deviation) are reported.
// Candidate and baseline are timed by this same function with the same options, so the cache state
// between repetitions is the same for both: with rotation, repetition r uses input set r mod pool size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace cake::eval {

struct TimingOptions {
  int warmup = 2;             // untimed calls first (lazy initialisation, first touch, frequency ramp)
  double min_seconds = 0.25;  // keep repeating until this much timed time...
  int min_reps = 5;           // ...and at least this many repetitions
  int max_reps = 10000;
  double max_seconds = 10.0;  // stop after this much timed time even below min_reps (very slow kernels)
};

struct Timing {
  double median_s = 0;
  double min_s = 0;
  double mad_s = 0;  // median absolute deviation from the median
  int reps = 0;
  nlohmann::json to_json() const;
};

// How many input sets a case's repetitions rotate over: for a memory-bound case (under 4 flops per byte of
// compulsory traffic) with at least 1 MiB of inputs, enough that together they exceed 64 MiB, so every call
// reads its inputs from DRAM; 1 otherwise. The candidate (cake-runner) and the baseline
// (cake-torch-baseline) both rotate by it, so they are timed from the same cache state.
size_t input_sets(double flops, double bytes, double input_bytes);
// The case seed of extra input set i (i >= 1) of a case whose inputs have seed `seed`.
uint64_t input_set_seed(uint64_t seed, size_t i);
// Set s of n for timed call `rep` (warm-up calls, rep < 0, take the sets from the start as well).
inline size_t input_set_of(int rep, size_t n) {
  return rep < 0 ? static_cast<size_t>(-1 - rep) % n : static_cast<size_t>(rep) % n;
}

// Times call(rep) (rep = 0, 1, ... counts timed calls; warm-up calls get rep = -1 - i).
Timing time_calls(const std::function<void(int rep)>& call, const TimingOptions& o = {});

// The median time_calls reports for a kernel of the C ABI that returns at once: the clock reads, the
// indirect call and the loop, which no kernel timed by the harness can go below (the roofline's T_call).
double call_floor_seconds();

}  // namespace cake::eval
