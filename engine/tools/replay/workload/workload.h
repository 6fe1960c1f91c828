// Copyright 2026 The pagedkv Authors.
//
// Workload: the requests `pagedkv replay` feeds to the cache, in one representation shared by
// Mooncake traces and the built-in generators.
//
// A request's prompt is a list of segments. A segment is `length` tokens of one piece of content
// (`content_id`): its tokens are SegmentToken(content_id, 0 .. length-1), a deterministic
// function, so two prompts that start with the same segments start with the same tokens. A
// Mooncake hash id is one segment of `trace_block_size` tokens (the last one of a request may be
// shorter); a generator's system prompt, document or chat message is one segment.
//
// Example:
//   Workload w;
//   w.requests.push_back({.arrival_ms = 0, .input_length = 700, .output_length = 32,
//                         .segments = {{.content_id = 7, .length = 512},
//                                      {.content_id = 9, .length = 188}}});
//   std::vector<TokenId> prompt = MaterializePrompt(w.requests[0], /*vocab_size=*/32000);
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_WORKLOAD_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {

// `length` tokens of the content `content_id` (tokens SegmentToken(content_id, 0..length-1)).
struct PAGEDKV_EXPORT Segment {
  uint64_t content_id = 0;  // identifies the tokens; equal ids mean equal tokens
  int32_t length = 0;       // tokens, > 0
};

// A span of a prompt marked as a reusable chunk (a RAG document): the same content can appear at
// different positions in different prompts, which shifted-position reuse exploits.
struct PAGEDKV_EXPORT ChunkSpan {
  uint64_t content_id = 0;   // position-free identity of the chunk's tokens
  int64_t token_offset = 0;  // first prompt position covered
  int64_t length = 0;        // tokens covered
};

// One request of a workload.
struct PAGEDKV_EXPORT ReplayRequest {
  double arrival_ms = 0;          // arrival time in milliseconds from the workload's start
  int64_t input_length = 0;       // prompt tokens (= sum of segment lengths)
  int64_t output_length = 0;      // tokens to generate
  std::vector<Segment> segments;  // the prompt, in order
  std::vector<ChunkSpan> chunks;  // reusable spans (documents); empty for most workloads
  int64_t source_line = 0;        // 1-based line of the trace file it came from; 0: generated
  // Eviction priorities of prompt spans (e.g. a pinned system prompt); blocks outside them have
  // the default priority. Cache-mode replay honours them (BlockPool priorities).
  std::vector<PrioritySpan> priority_spans;
};

// A named list of requests in arrival order.
struct PAGEDKV_EXPORT Workload {
  std::string name;                     // "conversation", a trace file name, ...
  std::vector<ReplayRequest> requests;  // in arrival (file) order
  // Tokens per segment when the workload comes from a Mooncake trace (every segment but a
  // request's last has exactly this many tokens); 0 for generated workloads, whose segments have
  // any length.
  int32_t trace_block_size = 0;
  int64_t skipped_lines = 0;  // malformed trace lines skipped (--skip-bad-lines)

  // Sum of input_length over requests.
  int64_t TotalInputTokens() const;
};

// The token at `offset` of content `content_id`, in [0, vocab_size). Deterministic.
// REQUIRES: vocab_size > 0.
PAGEDKV_EXPORT TokenId SegmentToken(uint64_t content_id, int64_t offset, int32_t vocab_size);

// The prompt tokens of `request` (input_length of them). REQUIRES: vocab_size > 0.
PAGEDKV_EXPORT std::vector<TokenId> MaterializePrompt(const ReplayRequest& request,
                                                      int32_t vocab_size);

// OK when every request's segments are positive and sum to its input_length, lengths are
// non-negative, arrivals do not decrease, chunks lie inside their prompts, and (for traces)
// every segment but the last has trace_block_size tokens. Otherwise InvalidArgument naming the
// request.
PAGEDKV_EXPORT absl::Status ValidateWorkload(const Workload& workload);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_WORKLOAD_H_
