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
#ifndef PAGEDKV_ENGINE_REPLAY_MOONCAKE_TRACE_H_
#define PAGEDKV_ENGINE_REPLAY_MOONCAKE_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/replay/workload.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT TraceOptions {
  int32_t trace_block_size = 512;  // tokens per hash id (Mooncake traces use 512)
  bool skip_bad_lines = false;     // skip malformed lines (counted) instead of failing
};

// Parses JSONL `text`. A malformed line gives InvalidArgument "line N: <what is wrong>" unless
// options.skip_bad_lines, which skips it and counts it in Workload::skipped_lines. A line is
// malformed when it is not one JSON object, a required field is missing or has the wrong type or
// range, its hash id count is not ceil(input_length / trace_block_size), or its timestamp is
// below the previous good line's. REQUIRES nothing; bad options give InvalidArgument.
PAGEDKV_EXPORT absl::StatusOr<Workload> ParseMooncakeTrace(std::string_view text,
                                                           const TraceOptions& options,
                                                           std::string_view name = "trace");

// Reads `path` (gzip-compressed or plain; detected from its bytes) and parses it as above.
// NotFound when the file is missing, DataLoss when the gzip stream is corrupt or truncated.
PAGEDKV_EXPORT absl::StatusOr<Workload> LoadMooncakeTrace(const std::string& path,
                                                          const TraceOptions& options);

// The whole contents of `path`, decompressed when it is gzip-compressed.
PAGEDKV_EXPORT absl::StatusOr<std::string> ReadMaybeGzippedFile(const std::string& path);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_REPLAY_MOONCAKE_TRACE_H_
