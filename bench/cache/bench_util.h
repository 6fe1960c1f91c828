// Copyright 2026 The pagedkv Authors.
//
// Helpers for the cache benchmarks: per-thread CPU time, so numbers and ratios stay meaningful when
// other processes share the machine.
#ifndef PAGEDKV_BENCH_CACHE_BENCH_UTIL_H_
#define PAGEDKV_BENCH_CACHE_BENCH_UTIL_H_

#include <time.h>

#include "benchmark/benchmark.h"

namespace pagedkv::bench {

inline double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Runs `fn` once per benchmark iteration; returns this thread's CPU ns per iteration.
template <typename Fn>
double MeasureCpuNs(benchmark::State& state, Fn fn) {
  double total_ns = 0;
  for (auto _ : state) {
    const double start = ThreadCpuNs();
    fn();
    total_ns += ThreadCpuNs() - start;
  }
  return total_ns / static_cast<double>(state.iterations());
}

}  // namespace pagedkv::bench

#endif  // PAGEDKV_BENCH_CACHE_BENCH_UTIL_H_
