// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: Mooncake trace parsing from memory. Any input is a list of lines; the parser must
// return a workload or an error, never crash, and every request it accepts must be consistent
// (hash ids cover input_length, timestamps in order).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "engine/tools/replay/workload/mooncake_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  pagedkv::replay::TraceOptions options;
  options.trace_block_size = input.ConsumeIntegralInRange<int32_t>(1, 1024);
  options.skip_bad_lines = input.ConsumeBool();
  options.memory_limit_bytes = 1 << 24;
  const std::string text = input.ConsumeRemainingBytesAsString();
  auto workload = pagedkv::replay::ParseMooncakeTrace(text, options, "fuzz");
  if (!workload.ok()) return 0;
  double last = 0;
  for (const auto& request : workload->requests) {
    int64_t tokens = 0;
    for (const auto& segment : request.segments) tokens += segment.length;
    if (tokens != request.input_length || request.arrival_ms < last) std::abort();
    last = request.arrival_ms;
  }
  return 0;
}
