// Copyright 2026 The pagedkv Authors.
//
// SharedTierView: one simulated instance's handle on a KV tier that several instances share
// (multi-instance serve replay's remote tier: one store of M blocks, as one Redis server is for
// every engine pointed at it). Every call goes to the shared HostTier, so a block one instance
// stored is a hit for every other; the view counts its own instance's share of the tier's
// statistics (the difference of the shared tier's counters across each call), while resident
// blocks and bytes are the shared tier's.
//
// Not thread-safe (nor is the shared tier). The shared tier must outlive every view.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<HostTier> remote,
//                            HostTier::Create({.capacity_blocks = m, .name = "remote"}));
//   std::vector<std::unique_ptr<KvTier>> chain;
//   chain.push_back(std::make_unique<SharedTierView>(remote.get()));  // one per instance
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SHARED_TIER_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SHARED_TIER_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/host_tier.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv::replay {

class PAGEDKV_EXPORT SharedTierView final : public KvTier {
 public:
  // REQUIRES: `shared` is not null and outlives the view.
  explicit SharedTierView(HostTier* shared) : shared_(shared) {}

  std::string_view name() const override { return shared_->name(); }
  std::string_view medium() const override { return shared_->medium(); }
  const TierStoreOptions& store_options() const override { return shared_->store_options(); }
  absl::StatusOr<int64_t> LoadPrefix(std::span<const TierBlock> blocks,
                                     TierValueSink sink) override;
  absl::Status Store(std::span<const TierStoreItem> items) override;
  // This instance's counters; resident_blocks / resident_bytes of the shared tier.
  TierStats stats() const override;

 private:
  // Adds the shared tier's counters since `before` to this view's.
  void AddSince(const TierStats& before);

  HostTier* shared_;
  TierStats own_;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SHARED_TIER_H_
