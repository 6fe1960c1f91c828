// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/block_expansion.h"

#define XXH_INLINE_ALL  // header-only xxHash: no library to link or install
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "engine/tools/replay/workload/workload.h"
#include "pagedkv/cache/block_index.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

// Little-endian u64 words, hashed as bytes (x86-64 and ARM64 Linux are little-endian).
void PutU64(std::vector<uint64_t>& words, uint64_t v) { words.push_back(v); }

}  // namespace

BlockHash ChunkSpanKey(const ChunkSpan& chunk) {
  // "pagedkv-replay-chunk" is 20 bytes: padded to 24 with zeros.
  uint64_t words[5] = {};
  static constexpr char kTag[] = "pagedkv-replay-chunk";
  std::memcpy(words, kTag, sizeof(kTag) - 1);
  words[3] = chunk.content_id;
  words[4] = static_cast<uint64_t>(chunk.length);
  const XXH128_hash_t h = XXH3_128bits(words, sizeof(words));
  return BlockHash{h.low64, h.high64};
}

namespace {

// ExpandRequestKeys with the keys handed to `emit` (first to last).
template <typename Emit>
int32_t EmitRequestKeys(const ReplayRequest& request, int32_t block_size, int32_t trace_block_size,
                        bool cache_partial_tail, Emit&& emit) {
  BlockHash parent{};
  if (trace_block_size > 0 && block_size == trace_block_size) {
    // One block per hash id, chained so that equal keys always mean equal prefixes; a partial
    // last hash id only in the old model.
    int32_t last = 0;
    for (const Segment& s : request.segments) {
      if (s.length < block_size && !cache_partial_tail) break;
      const uint64_t words[4] = {parent.low, parent.high, s.content_id,
                                 static_cast<uint64_t>(s.length)};
      const XXH128_hash_t h = XXH3_128bits(words, sizeof(words));
      parent = BlockHash{h.low64, h.high64};
      emit(parent);
      last = s.length;
    }
    return last;
  }
  const int64_t full_blocks = request.input_length / block_size;
  if (trace_block_size > 0 && trace_block_size % block_size == 0) {
    // No block spans two segments: the same 4 words as the general walk below, without it.
    int64_t b = 0;
    for (const Segment& s : request.segments) {
      for (int64_t off = 0; off + block_size <= s.length && b < full_blocks; off += block_size) {
        const uint64_t words[4] = {
            parent.low, parent.high, s.content_id,
            static_cast<uint64_t>(off) | (static_cast<uint64_t>(off + block_size) << 32)};
        const XXH128_hash_t h = XXH3_128bits(words, sizeof(words));
        parent = BlockHash{h.low64, h.high64};
        emit(parent);
        ++b;
      }
    }
    return full_blocks > 0 ? block_size : 0;
  }
  // Walk the segments with a cursor, emitting one key per full block.
  thread_local std::vector<uint64_t> buf;
  size_t seg = 0;
  int64_t seg_off = 0;  // tokens of segments[seg] already consumed
  for (int64_t b = 0; b < full_blocks; ++b) {
    buf.clear();
    PutU64(buf, parent.low);
    PutU64(buf, parent.high);
    int64_t need = block_size;
    while (need > 0) {
      const Segment& s = request.segments[seg];
      const int64_t take = std::min<int64_t>(need, s.length - seg_off);
      PutU64(buf, s.content_id);
      PutU64(buf, static_cast<uint64_t>(seg_off) | (static_cast<uint64_t>(seg_off + take) << 32));
      need -= take;
      seg_off += take;
      if (seg_off == s.length) {
        ++seg;
        seg_off = 0;
      }
    }
    const XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size() * sizeof(uint64_t));
    parent = BlockHash{h.low64, h.high64};
    emit(parent);
  }
  return full_blocks > 0 ? block_size : 0;
}

}  // namespace

int32_t ExpandRequestKeys(const ReplayRequest& request, int32_t block_size,
                          int32_t trace_block_size, std::vector<BlockHash>* keys,
                          bool cache_partial_tail) {
  return EmitRequestKeys(request, block_size, trace_block_size, cache_partial_tail,
                         [keys](const BlockHash& k) { keys->push_back(k); });
}

namespace {

// The chained keys of every request, with the per-request bookkeeping.
void ExpandKeys(const Workload& workload, int32_t block_size, bool cache_partial_tail,
                ExpandedWorkload& e) {
  const size_t n = workload.requests.size();
  e.request_begin.reserve(n + 1);
  e.last_block_tokens.reserve(n);
  e.input_tokens.reserve(n);
  e.request_begin.push_back(0);
  for (const ReplayRequest& r : workload.requests) {
    const int32_t last =
        ExpandRequestKeys(r, block_size, workload.trace_block_size, &e.keys, cache_partial_tail);
    e.request_begin.push_back(static_cast<int64_t>(e.keys.size()));
    e.last_block_tokens.push_back(last);
    e.input_tokens.push_back(r.input_length);
    e.total_tokens += r.input_length;
    if (!(e.one_block_per_hash_id && cache_partial_tail)) {
      e.partial_tokens += r.input_length % block_size;
    }
  }
}

// The marked chunks of every request (nothing when no request marks one).
void ExpandPriorities(const Workload& workload, ExpandedWorkload& e) {
  const bool any = std::any_of(workload.requests.begin(), workload.requests.end(),
                               [](const ReplayRequest& r) { return !r.priority_spans.empty(); });
  if (!any) return;
  e.priorities.reserve(e.keys.size());
  for (size_t r = 0; r < workload.requests.size(); ++r) {
    const std::vector<PrioritySpan>& spans = workload.requests[r].priority_spans;
    for (int64_t i = e.request_begin[r]; i < e.request_begin[r + 1]; ++i) {
      const int64_t first = (i - e.request_begin[r]) * e.block_size;
      e.priorities.push_back(
          static_cast<int8_t>(BlockPriority({}, spans, first, e.block_size).priority));
    }
  }
}

void ExpandChunks(const Workload& workload, ExpandedWorkload& e) {
  const bool any_chunks = std::any_of(workload.requests.begin(), workload.requests.end(),
                                      [](const ReplayRequest& r) { return !r.chunks.empty(); });
  if (!any_chunks) return;
  e.chunk_begin.reserve(workload.requests.size() + 1);
  e.chunk_begin.push_back(0);
  for (const ReplayRequest& r : workload.requests) {
    for (const ChunkSpan& c : r.chunks) {
      e.chunks.push_back({.key = ChunkSpanKey(c), .position = c.token_offset, .length = c.length});
    }
    e.chunk_begin.push_back(static_cast<int64_t>(e.chunks.size()));
  }
}

// Each chunk's next use: the next request marking a chunk with the same key.
void ComputeChunkNextUses(ExpandedWorkload& e) {
  absl::flat_hash_map<BlockHash, int32_t, BlockHashMix> next_request;
  for (size_t r = e.num_requests(); r-- > 0;) {
    for (int64_t c = e.chunk_begin[r]; c < e.chunk_begin[r + 1]; ++c) {
      TrackedChunk& chunk = e.chunks[static_cast<size_t>(c)];
      const auto it = next_request.find(chunk.key);
      chunk.next_use = it == next_request.end() ? kNeverUsed : it->second;
    }
    for (int64_t c = e.chunk_begin[r]; c < e.chunk_begin[r + 1]; ++c) {
      next_request[e.chunks[static_cast<size_t>(c)].key] = static_cast<int32_t>(r);
    }
  }
}

// Numbers the distinct keys densely in first-seen order (one hash pass; seen_before and next_use
// then work on the dense ids with plain arrays) and sets e.distinct_blocks. The table is
// BlockPool's index (8-byte slots, keys kept aside), probed with the slots of later keys
// prefetched: this pass is DRAM-bound on real traces.
std::vector<int32_t> NumberDistinctKeys(ExpandedWorkload& e) {
  constexpr size_t kPrefetchDistance = 16;
  const size_t num_blocks = e.keys.size();
  std::vector<int32_t> dense(num_blocks);
  BlockIndex ids(static_cast<int64_t>(num_blocks));
  std::vector<BlockHash> distinct;
  const auto key_of = [&distinct](int32_t id) -> const BlockHash& {
    return distinct[static_cast<size_t>(id)];
  };
  for (size_t i = 0; i < num_blocks; ++i) {
    if (i + kPrefetchDistance < num_blocks) ids.Prefetch(e.keys[i + kPrefetchDistance]);
    const auto [id, inserted] =
        ids.TryInsert(e.keys[i], static_cast<int32_t>(distinct.size()), key_of);
    if (inserted) distinct.push_back(e.keys[i]);
    dense[i] = id;
  }
  e.distinct_blocks = static_cast<int64_t>(distinct.size());
  return dense;
}

// A key repeated inside one request counts as seen only when an earlier request had it.
void MarkSeenBefore(const std::vector<int32_t>& dense, ExpandedWorkload& e) {
  constexpr int32_t kNone = -1;
  std::vector<int32_t> last(static_cast<size_t>(e.distinct_blocks), kNone);
  e.seen_before.assign(e.keys.size(), 0);
  for (size_t r = 0; r < e.num_requests(); ++r) {
    for (int64_t i = e.request_begin[r]; i < e.request_begin[r + 1]; ++i) {
      const int32_t prev = last[dense[i]];
      e.seen_before[i] = prev != kNone && prev < static_cast<int32_t>(r);
    }
    for (int64_t i = e.request_begin[r]; i < e.request_begin[r + 1]; ++i) {
      last[dense[i]] = static_cast<int32_t>(r);
    }
  }
}

// Each block's next use: the next request holding the same key (for belady).
void ComputeBlockNextUses(const std::vector<int32_t>& dense, ExpandedWorkload& e) {
  e.next_use.assign(e.keys.size(), kNeverUsed);
  std::vector<int32_t> next(static_cast<size_t>(e.distinct_blocks), kNeverUsed);
  for (size_t r = e.num_requests(); r-- > 0;) {
    for (int64_t i = e.request_begin[r]; i < e.request_begin[r + 1]; ++i) {
      e.next_use[i] = next[dense[i]];
    }
    for (int64_t i = e.request_begin[r]; i < e.request_begin[r + 1]; ++i) {
      next[dense[i]] = static_cast<int32_t>(r);
    }
  }
}

// Whether the hash-id-prefix pass (HashIdPrefixCoverage) applies: a trace whose hash ids split
// into whole blocks, every block full (no partial hash id kept as a block), and no next uses.
bool CanMarkByHashIdPrefix(const Workload& workload, const ExpansionOptions& options) {
  return !options.compute_next_use && options.block_size > 0 && workload.trace_block_size > 0 &&
         workload.trace_block_size % options.block_size == 0 &&
         !(workload.trace_block_size == options.block_size && options.cache_partial_tail);
}

// seen_before and distinct_blocks without numbering every block key. When block_size divides
// trace_block_size, a block lies inside one hash id, and two blocks have equal keys exactly when
// their requests share the hash-id prefix up to that hash id and the block sits at the same
// offset in it (ExpandRequestKeys). So a block was seen before exactly when an earlier request
// had its hash-id prefix and covered the block's tokens of that hash id: one table entry per
// distinct hash-id prefix (1/32 of the blocks at 16 tokens) holds the tokens covered so far.
// Requests go through Mark in order. REQUIRES: CanMarkByHashIdPrefix.
class HashIdPrefixCoverage {
 public:
  HashIdPrefixCoverage(const Workload& workload, int32_t block_size) : bs_(block_size) {
    size_t num_segments = 0;
    for (const ReplayRequest& r : workload.requests) num_segments += r.segments.size();
    covered_.reserve(num_segments);
  }

  // Writes the seen_before flags of `request`'s blocks to seen[0..blocks).
  void Mark(const ReplayRequest& request, uint8_t* seen) {
    BlockHash prefix{};
    for (const Segment& seg : request.segments) {
      const uint64_t words[3] = {prefix.low, prefix.high, seg.content_id};
      const XXH128_hash_t h = XXH3_128bits(words, sizeof(words));
      prefix = BlockHash{h.low64, h.high64};
      const int32_t full = seg.length / bs_ * bs_;  // tokens in full blocks
      int32_t& c = covered_.try_emplace(prefix, 0).first->second;
      for (int32_t end = bs_; end <= full; end += bs_) *seen++ = end <= c;
      if (full > c) {
        distinct_ += (full - c) / bs_;
        c = full;
      }
    }
  }

  int64_t distinct() const { return distinct_; }

 private:
  const int32_t bs_;
  absl::flat_hash_map<BlockHash, int32_t, BlockHashMix> covered_;  // prefix -> tokens covered
  int64_t distinct_ = 0;
};

void MarkSeenBeforeByHashIdPrefix(const Workload& workload, ExpandedWorkload& e) {
  HashIdPrefixCoverage coverage(workload, e.block_size);
  e.seen_before.assign(e.keys.size(), 0);
  for (size_t r = 0; r < workload.requests.size(); ++r) {
    coverage.Mark(workload.requests[r], e.seen_before.data() + e.request_begin[r]);
  }
  e.distinct_blocks = coverage.distinct();
}

absl::Status CheckExpansionOptions(const Workload& workload, const ExpansionOptions& options) {
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--block-size must be > 0 (got %d)", options.block_size));
  }
  if (workload.requests.size() >= static_cast<size_t>(kNeverUsed)) {
    return absl::InvalidArgumentError("too many requests (at most 2^31 - 2)");
  }
  return ValidateWorkload(workload);
}

absl::Status CheckBlockCount(size_t blocks) {
  if (blocks < static_cast<size_t>(kNeverUsed)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "the workload expands to %d blocks; at most 2^31 - 2 are supported (use a larger "
      "--block-size)",
      blocks));
}

}  // namespace

absl::StatusOr<ExpandedWorkload> ExpandWorkload(const Workload& workload,
                                                const ExpansionOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(CheckExpansionOptions(workload, options));
  ExpandedWorkload e;
  e.block_size = options.block_size;
  e.one_block_per_hash_id =
      workload.trace_block_size > 0 && workload.trace_block_size == options.block_size;
  e.engine_rules = !options.cache_partial_tail;
  ExpandKeys(workload, options.block_size, options.cache_partial_tail, e);
  ExpandPriorities(workload, e);
  ExpandChunks(workload, e);
  if (e.has_chunks() && options.compute_next_use) ComputeChunkNextUses(e);
  PAGEDKV_RETURN_IF_ERROR(CheckBlockCount(e.keys.size()));
  if (CanMarkByHashIdPrefix(workload, options)) {
    MarkSeenBeforeByHashIdPrefix(workload, e);
    return e;
  }
  const std::vector<int32_t> dense = NumberDistinctKeys(e);
  MarkSeenBefore(dense, e);
  if (options.compute_next_use) ComputeBlockNextUses(dense, e);
  return e;
}

bool StreamedExpansion::Streamable(const Workload& workload, const ExpansionOptions& options) {
  const auto marks = [](const ReplayRequest& r) {
    return !r.chunks.empty() || !r.priority_spans.empty();
  };
  return CanMarkByHashIdPrefix(workload, options) &&
         std::none_of(workload.requests.begin(), workload.requests.end(), marks);
}

absl::StatusOr<std::unique_ptr<StreamedExpansion>> StreamedExpansion::Start(
    const Workload& workload, const ExpansionOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(CheckExpansionOptions(workload, options));
  if (!Streamable(workload, options)) {
    return absl::FailedPreconditionError(
        "this workload cannot be expanded while it is replayed (use ExpandWorkload)");
  }
  std::unique_ptr<StreamedExpansion> s(new StreamedExpansion(workload));
  PAGEDKV_RETURN_IF_ERROR(s->Size(options));
  s->thread_ = std::thread([p = s.get(), options] { p->Fill(options); });
  return s;
}

StreamedExpansion::~StreamedExpansion() { Finish(); }

void StreamedExpansion::Finish() {
  if (thread_.joinable()) thread_.join();
}

// Everything but the keys and seen_before: only full blocks are blocks, so each request's block
// count follows from its lengths.
absl::Status StreamedExpansion::Size(const ExpansionOptions& options) {
  const int32_t bs = options.block_size;
  e_.block_size = bs;
  e_.one_block_per_hash_id = workload_.trace_block_size == bs;
  e_.engine_rules = !options.cache_partial_tail;
  const size_t n = workload_.requests.size();
  e_.request_begin.reserve(n + 1);
  e_.last_block_tokens.reserve(n);
  e_.input_tokens.reserve(n);
  e_.request_begin.push_back(0);
  int64_t blocks = 0;
  for (const ReplayRequest& r : workload_.requests) {
    const int64_t full = r.input_length / bs;
    blocks += full;
    e_.request_begin.push_back(blocks);
    e_.last_block_tokens.push_back(full > 0 ? bs : 0);
    e_.input_tokens.push_back(r.input_length);
    e_.total_tokens += r.input_length;
    e_.partial_tokens += r.input_length % bs;
  }
  PAGEDKV_RETURN_IF_ERROR(CheckBlockCount(static_cast<size_t>(blocks)));
  e_.keys.resize(static_cast<size_t>(blocks));
  e_.seen_before.resize(static_cast<size_t>(blocks));
  return absl::OkStatus();
}

// The expansion thread: keys and seen_before request by request, published in order.
void StreamedExpansion::Fill(const ExpansionOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  HashIdPrefixCoverage coverage(workload_, options.block_size);
  for (size_t r = 0; r < workload_.requests.size(); ++r) {
    const ReplayRequest& request = workload_.requests[r];
    BlockHash* out = e_.keys.data() + e_.request_begin[r];
    EmitRequestKeys(request, options.block_size, workload_.trace_block_size,
                    options.cache_partial_tail, [&out](const BlockHash& k) { *out++ = k; });
    coverage.Mark(request, e_.seen_before.data() + e_.request_begin[r]);
    ready_.store(static_cast<int64_t>(r + 1), std::memory_order_release);
  }
  e_.distinct_blocks = coverage.distinct();
  fill_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace pagedkv::replay
