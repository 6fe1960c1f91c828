// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: Mooncake trace files, gzip-compressed or plain, through the streaming loader with
// small bounds (line length, decompressed size, memory), so corrupt streams and gzip bombs must
// end in an error, never a crash or unbounded growth.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/replay/mooncake_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    char name[] = "/tmp/pagedkv_fuzz_trace_XXXXXX";
    const int fd = mkstemp(name);
    if (fd >= 0) close(fd);
    return std::string(name);
  }();
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
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
