// Timing by the harness (DESIGN §6): warm-up calls, then repetitions until both a minimum total time
// and a minimum count are reached; median, min and the spread (median absolute deviation) are reported.
// Candidate and baseline are timed by this same function with the same options, so the cache state
// between repetitions is the same for both: with rotation, repetition r uses input set r mod pool size.
#pragma once

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

// Times call(rep) (rep = 0, 1, ... counts timed calls; warm-up calls get rep = -1 - i).
Timing time_calls(const std::function<void(int rep)>& call, const TimingOptions& o = {});

// The median time_calls reports for a kernel of the C ABI that returns at once: the clock reads, the
// indirect call and the loop, which no kernel timed by the harness can go below (the roofline's T_call).
double call_floor_seconds();

}  // namespace cake::eval
