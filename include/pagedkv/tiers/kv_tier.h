// Copyright 2026 The pagedkv Authors.
//
// KvTier: a store of KV blocks below the device pool (host memory, a shared Redis server), keyed
// by the block's portable chain hash (block_hash.h: the root holds the salt and the model
// fingerprint, so a hash means the same tokens in the same context for the same model anywhere).
// A tier holds opaque values (the engine serialises a block's K/V pages of every layer into one
// value) beside the block's token ids, which it checks on every load.
//
// Lookup walks the chain: LoadPrefix(blocks) hands the values of blocks[0], blocks[1], ... to a
// sink and stops at the first block the tier does not hold. A fault (an unreachable or slow
// store, a timeout, a value with a wrong checksum, header or tokens) is a miss: counted in
// TierStats, reported once per incident by the tier, never an error and never a wrong value.
//
// The store rule and threshold (TierStoreOptions) are read by whoever copies blocks into the
// tier (the engine): write-through stores a block when the device pool caches it, write-back
// when the device pool evicts it; either only once the block was reused `threshold` times.
//
// Events: a tier emits kBlockStored / kBlockRemoved with KvEvent::medium set to its medium
// (kMediumCpu for the host tier; "EXTERNAL" for the Redis tier, which reports only the blocks
// this engine wrote and what it learnt of them: see redis_tier.h) to its listeners, so a router
// can follow every tier.
//
// Not thread-safe (the engine thread owns its tiers); the Redis tier documents its own threads.
//
// Example (the engine's lookup past a device hit of `d` blocks):
//   std::vector<pagedkv::TierBlock> rest = ...;   // blocks d.. of the request
//   PAGEDKV_ASSIGN_OR_RETURN(int64_t n, tier.LoadPrefix(rest, [&](int64_t i, auto value) {
//     return CopyIntoDeviceBlock(i, value);        // false: stop here (no device block left)
//   }));
#ifndef PAGEDKV_TIERS_KV_TIER_H_
#define PAGEDKV_TIERS_KV_TIER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// When the engine copies a block into a tier.
enum class TierStoreRule : uint8_t {
  kWriteThrough,  // when the device pool caches the block (after the step computed it)
  kWriteBack,     // when the device pool evicts the block
};

// "write-through" / "write-back"; InvalidArgument naming both for anything else.
PAGEDKV_EXPORT absl::StatusOr<TierStoreRule> ParseTierStoreRule(std::string_view name);
PAGEDKV_EXPORT std::string_view TierStoreRuleName(TierStoreRule rule);

struct PAGEDKV_EXPORT TierStoreOptions {
  TierStoreRule rule = TierStoreRule::kWriteThrough;
  // Store only blocks reused (device prefix hits) at least this many times; 0: every block.
  int32_t threshold = 0;
};

// What the bytes of a value mean, for tiers that check it (the Redis tier writes it into every
// value's header and refuses a value written with another): a reader whose format differs never
// uses the bytes.
struct PAGEDKV_EXPORT TierValueFormat {
  uint8_t dtype = 0;           // DType of the K/V elements
  uint8_t layout = 1;          // 1: per layer, the block's K page then its V page
  int32_t block_size = 0;      // tokens per block
  int32_t num_layers = 0;      // layers in a value
  int64_t value_bytes = 0;     // bytes of a value
  uint64_t layout_digest = 0;  // hash of everything else that shapes the bytes (heads, strides)
};

// One block of a chain, as a tier sees it.
struct PAGEDKV_EXPORT TierBlock {
  BlockHash hash;                   // chain hash: the key
  std::span<const TokenId> tokens;  // the block's token ids, stored and checked on load
};

// A block and its value, for Store.
struct PAGEDKV_EXPORT TierStoreItem {
  TierBlock block;
  std::span<const std::byte> value;  // the serialised KV (empty for a simulated tier)
};

// Counters of one tier (blocks and bytes).
struct PAGEDKV_EXPORT TierStats {
  int64_t lookups = 0;          // LoadPrefix calls
  int64_t queried_blocks = 0;   // blocks asked for (held ones plus the first missing one)
  int64_t hit_blocks = 0;       // blocks loaded (handed to the sink and taken)
  int64_t loaded_bytes = 0;     // bytes of those values
  int64_t stored_blocks = 0;    // blocks written
  int64_t stored_bytes = 0;     // bytes written
  int64_t store_skipped = 0;    // stores of a block already held (nothing written)
  int64_t evictions = 0;        // blocks dropped by the tier's policy (or its TTL, for Redis)
  int64_t faults = 0;           // misses and dropped stores caused by a fault (see the banner)
  int64_t incidents = 0;        // fault episodes reported (one per run of faults)
  int64_t resident_blocks = 0;  // blocks held now (when the tier knows; -1 when it does not)
  int64_t resident_bytes = 0;   // bytes held now (when the tier knows; -1 when it does not)
  // Bytes held now for every process that shares the tier's storage: the disk tier's folder as
  // its usage file last said; resident_bytes for a tier of this process alone; -1 when unknown.
  int64_t shared_resident_bytes = -1;

  // hit_blocks / queried_blocks, or 0.
  double HitRate() const;
  // One line, e.g. "lookups=3 queried=12 hits=8 (66.7%) loaded_bytes=1048576 stored=4 ...".
  std::string Summary() const;
};

// Takes the value of blocks[index]; returns false to stop the walk there (the block is then not
// counted as a hit), or an error that LoadPrefix returns as is. `value` is valid only during
// the call.
using TierValueSink =
    absl::FunctionRef<absl::StatusOr<bool>(int64_t index, std::span<const std::byte> value)>;

class PAGEDKV_EXPORT KvTier {
 public:
  virtual ~KvTier() = default;

  // "host" or "remote".
  virtual std::string_view name() const = 0;
  // The medium of its events (kMediumCpu, ...).
  virtual std::string_view medium() const = 0;
  virtual const TierStoreOptions& store_options() const = 0;

  // Hands the values of the longest leading run of `blocks` the tier holds (tokens verified) to
  // `sink`, in order, and returns how many the sink took. Faults are misses (see the banner);
  // only an error from `sink` is returned.
  virtual absl::StatusOr<int64_t> LoadPrefix(std::span<const TierBlock> blocks,
                                             TierValueSink sink) = 0;

  // Writes `items` (a block already held is skipped and counted). Faults drop the write and are
  // counted. InvalidArgument, with nothing written, for an item the tier can never hold (a value
  // of the wrong size, a token count that is not the tier's block size).
  virtual absl::Status Store(std::span<const TierStoreItem> items) = 0;

  virtual TierStats stats() const = 0;

  // Listeners get kBlockStored / kBlockRemoved with medium() (kv_events.h); returns an id.
  int AddEventListener(KvEventListener listener);
  bool RemoveEventListener(int id);

 protected:
  void Emit(const KvEvent& event) const;
  bool HasListeners() const { return !listeners_.empty(); }

 private:
  std::vector<std::pair<int, KvEventListener>> listeners_;
  int next_listener_id_ = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_TIERS_KV_TIER_H_
