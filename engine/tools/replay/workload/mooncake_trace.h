// Copyright 2026 The pagedkv Authors.
//
// Mooncake trace loader: JSON Lines, plain or gzip-compressed, one request per line:
//   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}
// timestamp is in milliseconds; hash id i names the i-th block of trace_block_size tokens of the
// prompt (the trace hashes a prompt's last partial block too), so a request carries
// ceil(input_length / trace_block_size) hash ids. Other fields are ignored; blank lines skipped.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(
//       Workload w, LoadMooncakeTrace("conversation_trace.jsonl.gz", {.trace_block_size = 512}));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_MOONCAKE_TRACE_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_MOONCAKE_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/tools/replay/workload/workload.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT TraceOptions {
  int32_t trace_block_size = 512;  // tokens per hash id (Mooncake traces use 512)
  bool skip_bad_lines = false;     // skip malformed lines (counted) instead of failing
  // Bounds on hostile input: the estimated bytes of the parsed requests (0: no limit), the bytes
  // of one line, and the decompressed bytes of a file (0: no limit). Past one, the load stops
  // with ResourceExhausted (memory, decompressed size) or InvalidArgument (line length).
  int64_t memory_limit_bytes = 0;
  int64_t max_line_bytes = int64_t{64} << 20;
  int64_t max_decompressed_bytes = int64_t{64} << 30;
};

// Parses JSONL `text`. A malformed line gives InvalidArgument "line N: <what is wrong>" unless
// options.skip_bad_lines, which skips it and counts it in Workload::skipped_lines. A line is
// malformed when it is not one JSON object, a required field is missing or has the wrong type or
// range, its hash id count is not ceil(input_length / trace_block_size), or its timestamp is
// below the previous good line's. REQUIRES nothing; bad options give InvalidArgument.
PAGEDKV_EXPORT absl::StatusOr<Workload> ParseMooncakeTrace(std::string_view text,
                                                           const TraceOptions& options,
                                                           std::string_view name = "trace");

// Streams `path` (gzip-compressed or plain; detected from its bytes) line by line and parses it
// as above. NotFound when the file is missing, DataLoss when the gzip stream is corrupt or
// truncated; the bounds of TraceOptions hold, so a gzip bomb or a huge line stops the load.
PAGEDKV_EXPORT absl::StatusOr<Workload> LoadMooncakeTrace(const std::string& path,
                                                          const TraceOptions& options);

// The lines of `path`, decompressed when it is gzip-compressed, each ending in '\n' (for
// benchmarks that parse from memory); the bounds of `options` hold.
PAGEDKV_EXPORT absl::StatusOr<std::string> ReadMaybeGzippedFile(const std::string& path,
                                                                const TraceOptions& options = {});

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_MOONCAKE_TRACE_H_
