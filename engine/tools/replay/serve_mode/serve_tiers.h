// Copyright 2026 The pagedkv Authors.
//
// Serve-mode replay's KV tiers: simulated host, disk and remote tiers (HostTier objects that hold
// hashes, no bytes) under the KvCacheManager's pool, walked with the engine's own TierChain
// (cache/tiers/tier_chain.h), and a bandwidth model that charges every load to the simulated clock:
//   load seconds = host blocks * block bytes / host link bandwidth
//                + remote blocks * block bytes / remote link bandwidth
//                + remote round trips * remote link latency
//                + disk blocks * block bytes / disk bandwidth + disk lookups * disk latency
// where block bytes = block_size * the model's KV bytes per token and a round trip is one lookup
// that reached the remote tier (one MGET). The loads of a step are charged before it runs (not
// overlapped with compute: an upper bound on their cost). Link presets (FindLinkPreset):
//   pcie4   25 GB/s, 2 us    (PCIe 4.0 x16, achievable)     pcie5   50 GB/s, 2 us  (PCIe 5.0 x16)
//   25gbe  3.1 GB/s, 100 us  (25 GbE TCP, one Redis hop)     100gbe 12.5 GB/s, 50 us (100 GbE)
//   rdma   50 GB/s, 10 us    (400 Gb/s RDMA, Mooncake-style)
//   nvme   6.5 GB/s, 80 us   (PCIe 4.0 NVMe SSD reads)       sata-ssd 0.5 GB/s, 100 us
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ServeTiers> tiers,
//                            ServeTiers::Create(options.tiers, manager, block_bytes));
//   PAGEDKV_ASSIGN_OR_RETURN(TierHits hits, tiers->Onboard(cache_request));
//   ... schedule ...; tiers->ReleasePins(); now += tiers->TakeLoadSeconds();
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_TIERS_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_TIERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/tiers/tier_chain.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/host_tier.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT LinkPreset {
  std::string name;
  double bytes_per_second = 0;
  double latency_s = 0;  // per round trip
};

PAGEDKV_EXPORT std::vector<LinkPreset> LinkPresets();
// Case-sensitive; InvalidArgument listing the names otherwise.
PAGEDKV_EXPORT absl::StatusOr<LinkPreset> FindLinkPreset(std::string_view name);

struct PAGEDKV_EXPORT ServeTierOptions {
  int64_t host_capacity_blocks = 0;    // > 0: a host tier of this many blocks
  int64_t remote_capacity_blocks = 0;  // > 0: a remote tier of this many blocks
  int64_t disk_capacity_blocks = 0;    // > 0: a disk tier (between host and remote) of this many
  std::string policy = "lru";          // the tiers' eviction policy: lru or arc
  TierStoreRule host_store = TierStoreRule::kWriteThrough;
  int32_t host_store_threshold = 0;  // host tier: store only blocks with this many prefix hits
  LinkPreset host_link = {"pcie5", 50e9, 2e-6};
  LinkPreset remote_link = {"100gbe", 12.5e9, 50e-6};
  LinkPreset disk_link = {"nvme", 6.5e9, 80e-6};

  bool enabled() const {
    return host_capacity_blocks > 0 || disk_capacity_blocks > 0 || remote_capacity_blocks > 0;
  }
};

class PAGEDKV_EXPORT ServeTiers {
 public:
  // The tiers attach to `manager`'s pool through TierChain::Create (REQUIRES: the manager
  // outlives the result). InvalidArgument for a null manager, negative capacities or threshold,
  // an unknown policy or a link without bandwidth. With `shared_remote` (several instances, one
  // remote tier: not owned, must outlive the result) the remote tier is a SharedTierView of it
  // (shared_tier.h) and options.remote_capacity_blocks only has to be > 0.
  static absl::StatusOr<std::unique_ptr<ServeTiers>> Create(const ServeTierOptions& options,
                                                            KvCacheManager* manager,
                                                            double block_bytes,
                                                            HostTier* shared_remote = nullptr);

  absl::StatusOr<TierHits> Onboard(const CacheRequest& request) { return chain_->Onboard(request); }
  absl::Status ReleasePins() { return chain_->ReleasePins(); }
  absl::Status FlushWriteThrough() { return chain_->FlushWriteThrough(); }
  // Seconds of the loads since the last call (see the banner).
  double TakeLoadSeconds();
  // {host, remote} stats (zero for a tier that is not configured).
  TierStats host_stats() const;
  TierStats remote_stats() const;
  TierStats disk_stats() const;

 private:
  // Moves nothing: simulated tiers hold no bytes.
  class NoBytes final : public BlockValueIo {
   public:
    int64_t value_bytes() const override { return 0; }
    absl::Status Read(BlockId, std::span<std::byte>) override { return absl::OkStatus(); }
    absl::Status Write(BlockId, std::span<const std::byte>) override { return absl::OkStatus(); }
  };
  ServeTiers(const ServeTierOptions& options, double block_bytes)
      : options_(options), block_bytes_(block_bytes) {}
  const KvTier* Find(std::string_view name) const;

  ServeTierOptions options_;
  double block_bytes_;
  NoBytes io_;
  std::unique_ptr<TierChain> chain_;
  TierStats charged_host_, charged_remote_, charged_disk_;  // stats at the last TakeLoadSeconds
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_TIERS_H_
