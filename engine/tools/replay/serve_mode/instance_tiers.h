// Copyright 2026 The pagedkv Authors.
//
// InstanceTiers: the KV tiers of one simulated serving instance (ServeTiers: a host tier, a remote
// tier, the engine's TierChain and the link model) and what serve replay does around each of the
// instance's scheduler steps, as the engine does:
//   BeforeSchedule - the tier walk (TierChain::Onboard) of the waiting requests the step may
//                    admit, in arrival order, about two steps' token budget of them;
//   AfterSchedule  - unpins what the walk pinned;
//   AfterBatch     - the seconds the step's loads take on the links (charged before the step),
//                    the split of first admissions' prefix hits into the tiers they came from,
//                    and the write-through stores of the step's blocks.
// Single-instance serve replay (serve_simulation.cc) has one; multi-instance replay gives every
// instance its own (its own host tier) over one shared remote tier (SharedTierView,
// shared_tier.h).
//
// Not thread-safe. The manager (and a shared remote tier) must outlive it.
//
// Example (one step of an instance):
//   PAGEDKV_RETURN_IF_ERROR(tiers->BeforeSchedule());
//   PAGEDKV_RETURN_IF_ERROR(scheduler->Schedule(&batch));
//   PAGEDKV_RETURN_IF_ERROR(tiers->AfterSchedule());
//   PAGEDKV_ASSIGN_OR_RETURN(const double load_s, tiers->AfterBatch(batch));
//   now += load_s + cost.StepSeconds(work);
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_INSTANCE_TIERS_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_INSTANCE_TIERS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tools/replay/serve_mode/serve_tiers.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/tiers/host_tier.h"

namespace pagedkv::replay {

// Prompt tokens served by each tier at first admissions, and what the loads cost.
struct PAGEDKV_EXPORT InstanceTierCounts {
  int64_t host_hit_tokens = 0;
  int64_t remote_hit_tokens = 0;
  int64_t disk_hit_tokens = 0;
  int64_t host_loaded_blocks = 0;  // every load, re-admissions included
  int64_t remote_loaded_blocks = 0;
  int64_t disk_loaded_blocks = 0;
  double load_seconds = 0;  // simulated time charged for the loads
};

class PAGEDKV_EXPORT InstanceTiers {
 public:
  // `onboard_budget_tokens` (> 0): prompt tokens walked per step (the scheduler's token budget
  // times two). Errors as ServeTiers::Create.
  static absl::StatusOr<std::unique_ptr<InstanceTiers>> Create(const ServeTierOptions& options,
                                                               KvCacheManager* manager,
                                                               double block_bytes,
                                                               int64_t onboard_budget_tokens,
                                                               HostTier* shared_remote = nullptr);

  // Request `id`, accepted by the scheduler, waits for its first admission with `prompt`.
  void AddWaiting(RequestId id, std::vector<TokenId> prompt);
  absl::Status BeforeSchedule();
  absl::Status AfterSchedule() { return tiers_->ReleasePins(); }
  // REQUIRES: `batch` is the batch the last Schedule made. Returns the step's load seconds.
  absl::StatusOr<double> AfterBatch(const ScheduledBatch& batch);

  // The counters, with loaded blocks from the tiers' statistics.
  InstanceTierCounts counts() const;
  TierStats host_stats() const { return tiers_->host_stats(); }
  TierStats remote_stats() const { return tiers_->remote_stats(); }

 private:
  struct Waiting {
    std::vector<TokenId> prompt;
    TierHits hits;           // loaded by the walks so far (device_blocks: at the first walk)
    bool onboarded = false;  // walked at least once
  };
  InstanceTiers(KvCacheManager* manager, int64_t budget) : manager_(manager), budget_(budget) {}
  // Splits the prefix hits of first admissions in `batch` into the tiers they came from.
  void CountTierHits(const ScheduledBatch& batch);

  KvCacheManager* manager_;
  int64_t budget_;
  int32_t block_size_ = 0;
  std::unique_ptr<ServeTiers> tiers_;
  std::vector<RequestId> order_;  // waiting requests in arrival order
  absl::flat_hash_map<RequestId, Waiting> waiting_;
  InstanceTierCounts counts_;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_INSTANCE_TIERS_H_
