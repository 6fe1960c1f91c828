// Copyright 2026 The pagedkv Authors.
//
// Per-step KV event batches in the shape of vLLM's KV events (vllm/distributed/kv_events.py):
// an EventBatch holds a timestamp, the events of one engine step and the data-parallel rank; a
// BlockStored event covers several consecutive blocks of one chain (one request's newly full
// blocks), a BlockRemoved event one or more evicted blocks, AllBlocksCleared a reset.
// kv_event_codec.h encodes a batch as msgpack on the wire.
//
// KvEventBatcher turns the per-block callbacks of kv_events.h into such batches: feed it every
// KvEvent (it is a KvEventListener), and take a batch once per step. A stored event extends the
// previous event of the batch when that is a stored event of the same medium whose last block is
// this block's parent, so a request's blocks cached in one call become one event, as in vLLM.
// Consecutive removed events of one medium merge too (vLLM sends one per block; consumers read
// the list either way). The parent of a chain's first block is the chain's root hash in pagedkv
// (salt and model fingerprint); vLLM sends no parent there, so roots named with NoteRoot are sent
// as "no parent". Events of chunk-domain blocks (BlockDomain::kChunk: the chunk index's blocks
// for shifted reuse, hashed from a chunk key rather than a prefix) are not batched at all: no
// prefix router could reach them, and Dynamo's indexer logs every one as a missing parent.
//
// Differences from vLLM: pagedkv's hashes are 128-bit (the codec projects them, see
// kv_event_codec.h); extra keys are folded into the hash and not sent; lora_id / lora_name are
// not known at the pool and are sent as nil.
//
// Thread safety: not thread-safe (owned by the engine thread, like the KvCacheManager).
//
// Example:
//   pagedkv::KvEventBatcher batcher({.data_parallel_rank = 0});
//   pool->AddEventListener([&](const pagedkv::KvEvent& e) { batcher.Add(e); });
//   ...                                         // one engine step
//   pagedkv::KvEventBatch batch = batcher.Take(pagedkv::WallClockSeconds());
//   if (!batch.events.empty()) publisher->Publish(std::move(batch));
#ifndef PAGEDKV_EVENTS_KV_EVENT_BATCH_H_
#define PAGEDKV_EVENTS_KV_EVENT_BATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// vLLM's medium names ("DISK": its offloading connector's file-system tier, pagedkv's DiskTier).
inline constexpr char kMediumGpu[] = "GPU";
inline constexpr char kMediumCpu[] = "CPU";
inline constexpr char kMediumDisk[] = "DISK";

// One event of a batch (vLLM's BlockStored / BlockRemoved / AllBlocksCleared).
struct PAGEDKV_EXPORT KvBatchEvent {
  KvEventType type = KvEventType::kBlockStored;
  std::vector<BlockHash> block_hashes;  // stored / removed: the blocks, in chain order
  // Stored: the hash of the block before block_hashes[0]; nullopt for a chain's first block.
  std::optional<BlockHash> parent_block_hash;
  std::vector<TokenId> token_ids;        // stored: the blocks' tokens, concatenated (may be empty
                                         // when the pool was not given tokens, e.g. trace replay)
  int32_t block_size = 0;                // stored: tokens per block
  std::optional<int64_t> lora_id;        // stored: LoRA adapter; nullopt = none / unknown
  std::optional<std::string> lora_name;  // stored: LoRA name; nullopt = none / unknown
  std::optional<std::string> medium;     // stored / removed: kMediumGpu, kMediumCpu, ...
  // vLLM 0.33's fields with defaults (nullopt = None, omitted on the wire by the kVllm layout and
  // not sent by the older ones). KvEventBatcher sets group_idx (the event's own group when it
  // carries one, as a KvCacheManager of several groups stamps it with the kind and window;
  // else 0, as vLLM sends for a plain model); pagedkv leaves the rest unset. extra_keys and
  // lookahead_token_ids are not represented: pagedkv folds extra keys into the hash, and the
  // decoder skips both.
  std::optional<int32_t> group_idx;                     // stored / removed: KV cache group
  std::optional<std::string> kv_cache_spec_kind;        // stored
  std::optional<int32_t> kv_cache_spec_sliding_window;  // stored
  std::optional<std::string> locality;                  // stored / removed: LOCAL or REMOTE
  std::optional<std::string> ownership;                 // stored / removed: offloading tier
  std::optional<std::string> session_id;                // stored

  friend bool operator==(const KvBatchEvent&, const KvBatchEvent&) = default;
};

// The events of one step (vLLM's KVEventBatch).
struct PAGEDKV_EXPORT KvEventBatch {
  double timestamp = 0;  // seconds since the Unix epoch (or the replay's virtual clock)
  std::vector<KvBatchEvent> events;
  std::optional<int32_t> data_parallel_rank;  // nullopt = not data parallel

  friend bool operator==(const KvEventBatch&, const KvEventBatch&) = default;
};

// Seconds since the Unix epoch, as vLLM's time.time().
PAGEDKV_EXPORT double WallClockSeconds();

struct PAGEDKV_EXPORT KvEventBatcherOptions {
  std::optional<int32_t> data_parallel_rank;  // copied into every batch
  std::string medium = kMediumGpu;            // medium of the pool the events come from
  bool merge_removed = true;                  // merge consecutive removed events into one
  // KV cache group of stored / removed events that carry none (KvEvent::group_idx < 0).
  std::optional<int32_t> group_idx = 0;
};

class PAGEDKV_EXPORT KvEventBatcher {
 public:
  explicit KvEventBatcher(KvEventBatcherOptions options = {});

  // Appends `event` to the pending batch (coalescing as described in the banner). The tokens
  // the event points to are copied.
  void Add(const KvEvent& event);

  // `root` is the parent hash of chains' first blocks: stored events whose parent is a noted
  // root carry no parent. Idempotent; roots are few (one per salt).
  void NoteRoot(const BlockHash& root) { roots_.insert(root); }

  // The pending events as one batch stamped `timestamp`; the batcher starts a new one.
  KvEventBatch Take(double timestamp);

  bool empty() const { return events_.empty(); }
  int64_t num_pending_events() const { return static_cast<int64_t>(events_.size()); }

 private:
  void AddStored(const KvEvent& event);
  void AddRemoved(const KvEvent& event);
  // The event's own group when it carries one, else options_.group_idx.
  std::optional<int32_t> GroupOf(const KvEvent& event) const;

  KvEventBatcherOptions options_;
  std::vector<KvBatchEvent> events_;
  absl::flat_hash_set<BlockHash> roots_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_EVENTS_KV_EVENT_BATCH_H_
