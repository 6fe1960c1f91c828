// Copyright 2026 The pagedkv Authors.
//
// Start-up cost the `pagedkv` program does not need: Debian's libhwy (Highway 1.0.3) measures the
// timer's resolution in a static initializer of its nanobenchmark module (repeated serialized
// timer reads), about 3.5 ms of every process start on these virtual machines (bench/RESULTS.md,
// the start-up profile). pagedkv never runs Highway's nanobenchmark (its benchmarks use Google
// Benchmark), so this program defines the function itself: libhwy calls it through the PLT, and
// a definition in the executable comes first in the dynamic linker's search. Only the `pagedkv`
// executable carries this file, never a library an embedder links, so a program that does use
// Highway's nanobenchmark keeps the real measurement. The test `cli_hwy_timer_resolution_override`
// (tests/engine/tools/cli) checks that the dynamic linker binds libhwy's call to this definition.
#include <cstdint>

#include "hwy/nanobenchmark.h"

namespace hwy::platform {

// One tick: what nanobenchmark would use as the smallest measurable interval. Never called by
// pagedkv itself; here only so libhwy's load-time initializer does no work.
__attribute__((visibility("default"))) uint64_t TimerResolution() { return 1; }

}  // namespace hwy::platform
