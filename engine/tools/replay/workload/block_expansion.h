// Copyright 2026 The pagedkv Authors.
//
// Block expansion: cuts every prompt of a workload into cache blocks of `block_size` tokens and
// gives each block a 128-bit key that depends on the block's tokens and on everything before it,
// so equal prefixes give equal keys and a shared block after different prefixes does not.
//
//  - Mooncake trace at its own block size (block_size == trace_block_size): each hash id of a
//    full block is one block; its key chains XXH3-128 over the parent key, the hash id and the
//    block's token count (a Mooncake hash id already names its prefix; chaining keeps that true
//    for any trace). A request's partial last block is not a block (a serving engine never
//    caches one) unless ExpansionOptions::cache_partial_tail, the model before issue 29, which
//    keeps it as one block (the trace hashed it).
//  - Otherwise: block i covers tokens [i*B, (i+1)*B); its key chains XXH3-128 over the parent
//    key and the (content id, begin, end) pieces of segments it covers, i.e. exactly the
//    deterministic tokens the segments expand into (SegmentToken). Only full blocks count.
// In both, the tokens that do not fill a block are "not a full block" (partial_tokens), except
// for the partial tail that cache_partial_tail keeps.
//
// ExpandWorkload does this once for a whole workload (and precomputes what cache replay needs
// from the future: whether a block was seen before, and when it is next used).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(ExpandedWorkload e,
//                            ExpandWorkload(workload, {.block_size = 16}));
//   for (size_t r = 0; r < e.num_requests(); ++r) {
//     absl::Span<const BlockHash> keys = e.RequestKeys(r);  // first to last block
//   }
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_BLOCK_EXPANSION_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_BLOCK_EXPANSION_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tools/replay/workload/workload.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT ExpansionOptions {
  int32_t block_size = 16;       // cache block size in tokens (> 0)
  bool compute_next_use = true;  // fill next_use and chunks' next_use (needed by belady)
  // The block model before issue 29 (--cache-partial-tail): at the trace's own block size a
  // request's partial last hash id is a full cacheable block, no hit is capped, and no pool block
  // is held for a partial tail. Off (default): the serving engine's (vLLM's) rules, see
  // ExpandedWorkload::engine_rules.
  bool cache_partial_tail = false;
};

// "Never used again" in ExpandedWorkload::next_use.
inline constexpr int32_t kNeverUsed = std::numeric_limits<int32_t>::max();

// "Never needed again" in TrackedChunk::next_use when next uses were not computed.
inline constexpr int64_t kChunkNeverUsed = std::numeric_limits<int64_t>::max();

// A marked chunk of one request, as cache-mode replay counts it (cache_mode/chunk_replay.h).
struct PAGEDKV_EXPORT TrackedChunk {
  BlockHash key;         // position-free identity of the chunk's content (ChunkSpanKey)
  int64_t position = 0;  // first prompt position the chunk covers (>= 0)
  int64_t length = 0;    // tokens (> 0)
  // The next request index marking the same key, for the clairvoyant (belady) policy.
  int64_t next_use = kChunkNeverUsed;
};

// Every block of every request, concatenated. Request r's blocks are
// [request_begin[r], request_begin[r + 1]).
struct PAGEDKV_EXPORT ExpandedWorkload {
  int32_t block_size = 0;
  bool one_block_per_hash_id = false;  // trace replayed at its own block size
  // The serving engine's rules (!ExpansionOptions::cache_partial_tail): cache replay caps a
  // request's hit at input_length - 1 tokens and holds one uncached pool block for its partial
  // tail while the request runs (see cache_replay.h).
  bool engine_rules = true;
  std::vector<BlockHash> keys;             // [num_blocks] block keys
  std::vector<int64_t> request_begin;      // [num_requests + 1]
  std::vector<int32_t> last_block_tokens;  // [num_requests] tokens in the request's last block
  std::vector<int64_t> input_tokens;       // [num_requests] input_length
  std::vector<uint8_t> seen_before;        // [num_blocks] 1 when an earlier request had the key
  std::vector<int32_t> next_use;           // [num_blocks] next request index with the key, or
                                           // kNeverUsed (empty unless compute_next_use)
  // Marked chunks (ChunkSpan) of every request, in prompt order, keyed by ChunkSpanKey. Request
  // r's are [chunk_begin[r], chunk_begin[r + 1]). Both empty when no request marks a chunk. With
  // compute_next_use, each chunk's next_use is the next request index marking a chunk with the
  // same key, or kNeverUsed (otherwise kChunkNeverUsed).
  std::vector<TrackedChunk> chunks;
  std::vector<int64_t> chunk_begin;  // [num_requests + 1] or empty
  // [num_blocks] each block's eviction priority (ReplayRequest::priority_spans), or empty when no
  // request has a priority span.
  std::vector<int8_t> priorities;
  int64_t distinct_blocks = 0;  // distinct keys
  int64_t total_tokens = 0;     // sum of input_length
  int64_t partial_tokens = 0;   // prompt tokens in no full block (never cacheable)

  size_t num_requests() const { return input_tokens.size(); }
  int64_t num_blocks() const { return static_cast<int64_t>(keys.size()); }
  absl::Span<const BlockHash> RequestKeys(size_t r) const {
    return absl::MakeConstSpan(keys).subspan(
        static_cast<size_t>(request_begin[r]),
        static_cast<size_t>(request_begin[r + 1] - request_begin[r]));
  }
  bool has_chunks() const { return !chunks.empty(); }
  // Tokens of block j of request r (block_size, except a trace's partial last block).
  int32_t BlockTokens(size_t r, int64_t j) const {
    return j + 1 == request_begin[r + 1] - request_begin[r] ? last_block_tokens[r] : block_size;
  }
};

// The position-free key of a marked chunk: XXH3-128 over "pagedkv-replay-chunk" (zero-padded to
// 24 bytes) ‖ content_id ‖ length (u64 little-endian each). Equal content ids and lengths mean
// equal tokens (workload.h), wherever the span lies in its prompt.
PAGEDKV_EXPORT BlockHash ChunkSpanKey(const ChunkSpan& chunk);

// The keys of one request's blocks (see above), appended to `keys`; returns the tokens in the
// last block (0 when there is none). `cache_partial_tail` as in ExpansionOptions.
// REQUIRES: ValidateWorkload-valid request, block_size > 0.
PAGEDKV_EXPORT int32_t ExpandRequestKeys(const ReplayRequest& request, int32_t block_size,
                                         int32_t trace_block_size, std::vector<BlockHash>* keys,
                                         bool cache_partial_tail = false);

// Expands the whole workload. InvalidArgument for block_size <= 0, an invalid workload, or more
// than 2^31 - 1 requests.
PAGEDKV_EXPORT absl::StatusOr<ExpandedWorkload> ExpandWorkload(const Workload& workload,
                                                               const ExpansionOptions& options);

// ExpandWorkload on a thread of its own, for a cache replay that starts before the expansion
// ends (the whole run then takes about the longer of the two, not their sum; issue 28). Only for
// traces whose hash ids split into whole blocks, without next uses, chunks or priorities, and
// not the old model at the trace's block size (Streamable); it gives what ExpandWorkload gives.
//
//   PAGEDKV_ASSIGN_OR_RETURN(auto s, StreamedExpansion::Start(workload, {.block_size = 16,
//                                                                        .compute_next_use =
//                                                                        false}));
//   RunCacheReplay(s->expanded(), {.capacity_blocks = c, .requests_ready = &s->requests_ready()});
//   s->Finish();  // now distinct_blocks is set too
//
// Thread safety: expanded()'s keys and seen_before of request r may be read once
// requests_ready() > r (acquire load); everything else in it is set when Start returns.
class PAGEDKV_EXPORT StreamedExpansion {
 public:
  // InvalidArgument as ExpandWorkload; FailedPrecondition when !Streamable(workload, options).
  // REQUIRES: `workload` outlives the returned object.
  static absl::StatusOr<std::unique_ptr<StreamedExpansion>> Start(const Workload& workload,
                                                                  const ExpansionOptions& options);
  static bool Streamable(const Workload& workload, const ExpansionOptions& options);

  StreamedExpansion(const StreamedExpansion&) = delete;
  StreamedExpansion& operator=(const StreamedExpansion&) = delete;
  ~StreamedExpansion();  // waits for the thread

  const ExpandedWorkload& expanded() const { return e_; }
  const std::atomic<int64_t>& requests_ready() const { return ready_; }
  // Waits for the thread; then all of expanded() is valid.
  void Finish();
  // Wall seconds the thread took to write the keys and seen_before (valid after Finish).
  double fill_seconds() const { return fill_seconds_; }

 private:
  explicit StreamedExpansion(const Workload& workload) : workload_(workload) {}
  absl::Status Size(const ExpansionOptions& options);
  void Fill(const ExpansionOptions& options);

  const Workload& workload_;
  ExpandedWorkload e_;
  std::atomic<int64_t> ready_{0};  // requests whose keys and seen_before are written
  std::thread thread_;
  double fill_seconds_ = 0;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_BLOCK_EXPANSION_H_
