// Copyright 2026 The pagedkv Authors.
//
// PrefixRouterIndex: what a cache-aware router knows about many instances, built only from
// their KV event batches (kv_event_batch.h, decoded from the wire by KvEventSubscriber): which
// instance holds which block hashes in which medium (tier), and for a request's block hashes the
// longest cached prefix on each instance, weighted per medium (a block on the device is worth more
// than one that must first come back from host memory). PickInstance turns that into a routing
// choice with the cost Dynamo's KV router uses (docs/kv_events.md):
//
//   cost(i) = prefill_weight * (request_blocks - weighted_prefix_blocks(i)) + load_weight * load(i)
//
// the instance with the smallest cost wins (ties: smaller load, then fewer blocks held, which
// spreads new prefixes over the instances as a text-tree router's smallest-tree rule does, then
// smaller id).
//
// Keys are the hashes as they arrive (for pagedkv publishers WireBlockHash of the 128-bit
// hash); query with the same projection. Semantics per event: BlockStored adds (instance, hash,
// medium) for every hash; BlockRemoved drops the hash in that medium (all media when the event
// has none); AllBlocksCleared drops the instance's blocks. A prefix counts block i only if the
// instance holds blocks 0..i; parent hashes are not needed for that and are not checked.
//
// Thread safety: not thread-safe (one router thread applies events and queries).
//
// Example:
//   auto index = pagedkv::PrefixRouterIndex::Create({}).value();
//   index->Apply(/*instance=*/3, batch);
//   std::vector<pagedkv::InstancePrefixMatch> m = index->Match(request_hashes);
//   pagedkv::InstanceId pick = pagedkv::PickInstance(m, loads, request_hashes.size(), {});
#ifndef PAGEDKV_EVENTS_PREFIX_ROUTER_INDEX_H_
#define PAGEDKV_EVENTS_PREFIX_ROUTER_INDEX_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/export.h"

namespace pagedkv {

using InstanceId = int32_t;

struct PAGEDKV_EXPORT PrefixRouterIndexOptions {
  // Weight of a cached block per medium (0 = worthless, 1 = as good as computed here): a block
  // in host memory must be copied back first, one on local disk read back (slower still).
  std::vector<std::pair<std::string, double>> medium_weights = {
      {kMediumGpu, 1.0}, {kMediumCpu, 0.5}, {kMediumDisk, 0.25}};
  double unknown_medium_weight = 0.5;  // a medium not listed above, or none
};

struct PAGEDKV_EXPORT InstancePrefixMatch {
  InstanceId instance = 0;
  int64_t matched_blocks = 0;  // leading request blocks held, in any medium
  double weighted_blocks = 0;  // the same blocks, each at its best medium's weight
  int64_t held_blocks = 0;     // every block the instance holds, in any medium (a tie-break)
};

class PAGEDKV_EXPORT PrefixRouterIndex {
 public:
  // InvalidArgument for a weight outside [0, 1] or a medium listed twice.
  static absl::StatusOr<std::unique_ptr<PrefixRouterIndex>> Create(
      PrefixRouterIndexOptions options);

  // Makes `instance` known with no blocks (Apply does it too). Idempotent.
  void AddInstance(InstanceId instance);
  // Applies the batch's events, in order, to `instance`. Never fails.
  void Apply(InstanceId instance, const KvEventBatch& batch);
  void Apply(InstanceId instance, const KvBatchEvent& event);
  // Forgets the instance and its blocks (e.g. it left, or its stream lost batches). False if
  // unknown.
  bool RemoveInstance(InstanceId instance);

  // One entry per known instance, by ascending id.
  std::vector<InstancePrefixMatch> Match(std::span<const BlockHash> hashes) const;

  int32_t NumInstances() const { return static_cast<int32_t>(instances_.size()); }
  // Distinct hashes the instance holds (any medium); 0 when unknown.
  int64_t NumBlocks(InstanceId instance) const;
  // Distinct hashes held by any instance.
  int64_t NumDistinctHashes() const { return static_cast<int64_t>(holders_.size()); }

 private:
  struct Holder {
    InstanceId instance;
    uint32_t media;  // bit m: held in medium m
  };
  explicit PrefixRouterIndex(PrefixRouterIndexOptions options);
  uint32_t MediumBit(const std::optional<std::string>& medium);
  double BestWeight(uint32_t media) const;
  void Store(InstanceId instance, const BlockHash& hash, uint32_t bit);
  // Clears `bits` of the instance's holding of `hash`; forgets it when none is left.
  void Drop(InstanceId instance, const BlockHash& hash, uint32_t bits);

  PrefixRouterIndexOptions options_;
  std::vector<std::optional<std::string>> media_;  // bit index -> medium name (nullopt = none)
  std::vector<double> weights_;                    // bit index -> weight
  absl::flat_hash_map<BlockHash, absl::InlinedVector<Holder, 2>, BlockHashMix> holders_;
  absl::flat_hash_map<InstanceId, absl::flat_hash_set<BlockHash, BlockHashMix>> instances_;
};

struct PAGEDKV_EXPORT RouterCostOptions {
  double prefill_weight = 1.0;  // cost of one request block that must be prefilled
  double load_weight = 1.0;     // cost of one unit of the instance's load (e.g. active blocks)
};

// The instance with the smallest cost (see the banner) among `matches`; `loads[k]` is the load of
// matches[k].instance. REQUIRES: !matches.empty(), loads.size() == matches.size().
PAGEDKV_EXPORT InstanceId PickInstance(std::span<const InstancePrefixMatch> matches,
                                       std::span<const double> loads, int64_t request_blocks,
                                       const RouterCostOptions& options);

}  // namespace pagedkv

#endif  // PAGEDKV_EVENTS_PREFIX_ROUTER_INDEX_H_
