// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: Mooncake trace files, gzip-compressed or plain, through the streaming loader with
// small bounds (line length, decompressed size, memory), so corrupt streams and gzip bombs must
// end in an error, never a crash or unbounded growth.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/tools/replay/workload/mooncake_trace.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = pagedkv::fuzz::WriteFuzzFile("trace", data, size);
  if (path.empty()) return 0;
  auto workload = pagedkv::replay::LoadMooncakeTrace(path, {.trace_block_size = 16,
                                                            .skip_bad_lines = size % 2 == 0,
                                                            .memory_limit_bytes = 1 << 24,
                                                            .max_line_bytes = 1 << 16,
                                                            .max_decompressed_bytes = 1 << 22});
  // An error is a fine outcome; an accepted request must know its line.
  if (!workload.ok()) return 0;
  for (const auto& request : workload->requests) {
    if (request.source_line < 1) std::abort();
  }
  return 0;
}
