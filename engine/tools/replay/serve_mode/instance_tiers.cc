// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/instance_tiers.h"

#include <algorithm>
#include <utility>

#include "pagedkv/status_macros.h"

namespace pagedkv::replay {

absl::StatusOr<std::unique_ptr<InstanceTiers>> InstanceTiers::Create(
    const ServeTierOptions& options, KvCacheManager* manager, double block_bytes,
    int64_t onboard_budget_tokens, HostTier* shared_remote) {
  auto tiers = std::unique_ptr<InstanceTiers>(
      new InstanceTiers(manager, std::max<int64_t>(1, onboard_budget_tokens)));
  tiers->block_size_ = manager->block_size();
  PAGEDKV_ASSIGN_OR_RETURN(tiers->tiers_,
                           ServeTiers::Create(options, manager, block_bytes, shared_remote));
  return tiers;
}

void InstanceTiers::AddWaiting(RequestId id, std::vector<TokenId> prompt) {
  order_.push_back(id);
  waiting_[id] = Waiting{.prompt = std::move(prompt)};
}

absl::Status InstanceTiers::BeforeSchedule() {
  std::erase_if(order_, [this](RequestId id) { return !waiting_.contains(id); });
  int64_t planned = 0;
  for (RequestId id : order_) {
    Waiting& w = waiting_.at(id);
    const auto tokens = static_cast<int64_t>(w.prompt.size());
    if (planned > 0 && planned + tokens > budget_) break;
    planned += tokens;
    PAGEDKV_ASSIGN_OR_RETURN(CacheRequest request, manager_->NewRequest(id, w.prompt));
    PAGEDKV_ASSIGN_OR_RETURN(const TierHits hits, tiers_->Onboard(request));
    if (!w.onboarded) w.hits.device_blocks = hits.device_blocks;
    w.hits.host_blocks += hits.host_blocks;
    w.hits.remote_blocks += hits.remote_blocks;
    w.hits.disk_blocks += hits.disk_blocks;
    w.onboarded = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> InstanceTiers::AfterBatch(const ScheduledBatch& batch) {
  // The step's tier loads run before it (not overlapped), then its blocks are written through.
  const double load_s = tiers_->TakeLoadSeconds();
  counts_.load_seconds += load_s;
  CountTierHits(batch);
  PAGEDKV_RETURN_IF_ERROR(tiers_->FlushWriteThrough());
  return load_s;
}

void InstanceTiers::CountTierHits(const ScheduledBatch& batch) {
  const int64_t bs = block_size_;
  for (const ScheduledSequence& seq : batch.sequences) {
    auto it = waiting_.find(seq.request_id);
    if (!seq.newly_admitted || it == waiting_.end()) continue;
    const TierHits& h = it->second.hits;
    const auto clamp_tokens = [&](int64_t from_block, int64_t blocks) {
      return std::clamp<int64_t>(seq.num_prefix_hit_tokens - from_block * bs, 0, blocks * bs);
    };
    counts_.host_hit_tokens += clamp_tokens(h.device_blocks, h.host_blocks);
    counts_.disk_hit_tokens += clamp_tokens(h.device_blocks + h.host_blocks, h.disk_blocks);
    counts_.remote_hit_tokens +=
        clamp_tokens(h.device_blocks + h.host_blocks + h.disk_blocks, h.remote_blocks);
    waiting_.erase(it);
  }
}

InstanceTierCounts InstanceTiers::counts() const {
  InstanceTierCounts c = counts_;
  c.host_loaded_blocks = tiers_->host_stats().hit_blocks;
  c.remote_loaded_blocks = tiers_->remote_stats().hit_blocks;
  c.disk_loaded_blocks = tiers_->disk_stats().hit_blocks;
  return c;
}

}  // namespace pagedkv::replay
