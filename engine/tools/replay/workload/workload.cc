// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/workload.h"

#include "absl/strings/str_format.h"

namespace pagedkv::replay {
namespace {

__extension__ using U128 = unsigned __int128;

// SplitMix64 finaliser: a bijective 64-bit mix.
uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int64_t Workload::TotalInputTokens() const {
  int64_t total = 0;
  for (const ReplayRequest& r : requests) total += r.input_length;
  return total;
}

TokenId SegmentToken(uint64_t content_id, int64_t offset, int32_t vocab_size) {
  const uint64_t h = Mix64(Mix64(content_id) ^ static_cast<uint64_t>(offset));
  // Multiply-shift maps the 64-bit mix uniformly onto [0, vocab_size).
  return static_cast<TokenId>((static_cast<U128>(h) * vocab_size) >> 64);
}

std::vector<TokenId> MaterializePrompt(const ReplayRequest& request, int32_t vocab_size) {
  std::vector<TokenId> tokens;
  tokens.reserve(static_cast<size_t>(request.input_length));
  for (const Segment& s : request.segments) {
    for (int32_t i = 0; i < s.length; ++i) {
      tokens.push_back(SegmentToken(s.content_id, i, vocab_size));
    }
  }
  return tokens;
}

absl::Status ValidateWorkload(const Workload& workload) {
  double last_arrival = 0;
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const ReplayRequest& r = workload.requests[i];
    if (r.input_length <= 0 || r.output_length < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: input_length must be > 0 and output_length >= 0 (got %d, %d)", i,
          r.input_length, r.output_length));
    }
    if (i > 0 && r.arrival_ms < last_arrival) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request %d: arrival %g ms is before the previous request's %g ms", i,
                          r.arrival_ms, last_arrival));
    }
    last_arrival = r.arrival_ms;
    if (absl::Status spans = ValidatePrioritySpans(r.priority_spans); !spans.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("request %d: %s", i, spans.message()));
    }
    int64_t sum = 0;
    for (size_t s = 0; s < r.segments.size(); ++s) {
      const int32_t len = r.segments[s].length;
      if (len <= 0) {
        return absl::InvalidArgumentError(
            absl::StrFormat("request %d: segment %d has length %d (must be > 0)", i, s, len));
      }
      if (workload.trace_block_size > 0 && s + 1 < r.segments.size() &&
          len != workload.trace_block_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("request %d: segment %d has %d tokens but the trace block size is %d",
                            i, s, len, workload.trace_block_size));
      }
      sum += len;
    }
    if (sum != r.input_length) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "request %d: segments cover %d tokens but input_length is %d", i, sum, r.input_length));
    }
    for (const ChunkSpan& c : r.chunks) {
      if (c.token_offset < 0 || c.length <= 0 || c.token_offset + c.length > r.input_length) {
        return absl::InvalidArgumentError(
            absl::StrFormat("request %d: chunk [%d, %d) lies outside the %d-token prompt", i,
                            c.token_offset, c.token_offset + c.length, r.input_length));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::replay
