// Copyright 2026 The pagedkv Authors.
//
// The Engine's KV tiers below the device (EngineOptions.host_tier, remote_cache_url): creating
// them, their stats and event listeners, and the lookup of waiting requests (added or preempted)
// in them before the scheduler admits them.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/tiers/tier_chain.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/block_kv_copier.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/engine_request.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/disk_tier.h"
#include "pagedkv/tiers/host_tier.h"
#include "pagedkv/tiers/redis_tier.h"

namespace pagedkv {
void NoteOnboarding(const TierHits& hits, std::vector<BlockSource>* sources) {
  // The chain walks host, disk, remote in turn: their blocks follow the device's in that order.
  const int64_t host_end = hits.device_blocks + hits.host_blocks;
  const int64_t disk_end = host_end + hits.disk_blocks;
  const int64_t end = disk_end + hits.remote_blocks;
  if (static_cast<int64_t>(sources->size()) < end) {
    sources->resize(static_cast<size_t>(end), BlockSource::kDevice);
  }
  for (int64_t i = hits.device_blocks; i < end; ++i) {
    (*sources)[static_cast<size_t>(i)] = i < host_end   ? BlockSource::kHost
                                         : i < disk_end ? BlockSource::kDisk
                                                        : BlockSource::kRemote;
  }
}

TierHitTokens AttributeTierHits(int32_t hit_tokens, int32_t block_size,
                                const std::vector<BlockSource>& sources) {
  TierHitTokens out;
  const size_t hit_blocks = std::min(static_cast<size_t>(hit_tokens / block_size), sources.size());
  for (size_t i = 0; i < hit_blocks; ++i) {
    if (sources[i] == BlockSource::kHost) out.host += block_size;
    if (sources[i] == BlockSource::kRemote) out.remote += block_size;
    if (sources[i] == BlockSource::kDisk) out.disk += block_size;
  }
  return out;
}

absl::Status Engine::CreateTiers() {
  std::vector<std::unique_ptr<KvTier>> tiers;
  ModelRunner* runner = internals_->runner.get();
  const HostTierOptions& h = options_.host_tier;
  if (h.capacity_blocks != 0 || h.capacity_bytes != 0) {
    HostTierOptions host = h;
    host.value_bytes = BlockKvCopier(runner).value_bytes();
    host.block_size = options_.block_size;
    host.name = "host";
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<HostTier> tier, HostTier::Create(std::move(host)));
    tiers.push_back(std::move(tier));
  }
  if (!options_.disk_tier.directory.empty()) {
    const DiskCacheOptions& d = options_.disk_tier;
    PAGEDKV_ASSIGN_OR_RETURN(
        std::unique_ptr<DiskTier> disk,
        DiskTier::Create({.directory = d.directory,
                          .capacity_bytes = d.capacity_bytes,
                          .model_fingerprint = cache_->options().model_fingerprint,
                          .format = BlockKvCopier(runner).value_format(),
                          .policy = d.policy,
                          .store = d.store,
                          .max_pending_bytes = d.max_pending_bytes,
                          .read_threads = d.read_threads,
                          .report = d.report}));
    tiers.push_back(std::move(disk));
  }
  if (!options_.remote_cache_url.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvTier> remote, CreateRemoteTier(runner));
    tiers.push_back(std::move(remote));
  }
  if (tiers.empty()) return absl::OkStatus();
  if (!options_.enable_prefix_caching) {
    return absl::InvalidArgumentError(
        "EngineOptions: KV tiers (host_tier, disk_tier, remote_cache_url) need "
        "enable_prefix_caching; turn it on or drop the tiers");
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      internals_->tiers,
      TierChain::Create(std::move(tiers), internals_->copier.get(), cache_.get()));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvTier>> Engine::CreateRemoteTier(
    [[maybe_unused]] ModelRunner* runner) const {
#if PAGEDKV_HAVE_REDIS
  const RemoteCacheOptions& o = options_.remote_tier;
  RedisTierOptions r;
  r.key_prefix = o.key_prefix;
  r.ttl_seconds = o.ttl_seconds;
  r.connect_timeout_ms = o.connect_timeout_ms;
  r.io_timeout_ms = o.io_timeout_ms;
  r.backoff_initial_ms = o.backoff_initial_ms;
  r.backoff_max_ms = o.backoff_max_ms;
  r.store = o.store;
  r.report = o.report;
  r.now_ms = o.now_ms;
  PAGEDKV_ASSIGN_OR_RETURN(r.endpoint, ParseRedisUrl(options_.remote_cache_url));
  r.model_fingerprint = cache_->options().model_fingerprint;
  r.format = BlockKvCopier(runner).value_format();
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<RedisTier> tier, RedisTier::Create(std::move(r)));
  return std::unique_ptr<KvTier>(std::move(tier));
#else
  return absl::UnimplementedError(
      "EngineOptions.remote_cache_url: this pagedkv was built without the Redis tier "
      "(-DPAGEDKV_BUILD_REDIS=OFF); rebuild with it ON (needs libhiredis-dev)");
#endif
}

namespace {

DiskTier* FindDiskTier(TierChain* tiers) {
  if (tiers == nullptr) return nullptr;
  for (const auto& t : tiers->tiers()) {
    if (t->name() == "disk") return static_cast<DiskTier*>(t.get());
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<int64_t> Engine::SavePrefix(std::string_view name, std::span<const TokenId> prompt,
                                           std::string_view cache_salt) {
  DiskTier* disk = FindDiskTier(internals_->tiers.get());
  if (disk == nullptr) {
    return absl::FailedPreconditionError(
        "named saves need a disk tier: start with --disk-cache DIR (EngineOptions::disk_tier)");
  }
  if (cache_->num_groups() > 1) {
    return absl::FailedPreconditionError(
        "named saves need one KV cache group; this engine runs several (--hybrid-kv-cache off)");
  }
  PAGEDKV_ASSIGN_OR_RETURN(const CacheRequest request,
                           cache_->NewRequest(0, prompt, {.cache_salt = std::string(cache_salt)}));
  PAGEDKV_ASSIGN_OR_RETURN(const int64_t blocks, disk->Pin(name, request.block_hashes()));
  return blocks * options_.block_size;
}

bool Engine::HasSavedPrefix(std::string_view name) const {
  const DiskTier* disk = FindDiskTier(internals_->tiers.get());
  return disk != nullptr && disk->HasPin(name);
}

std::vector<std::pair<std::string, TierStats>> Engine::tier_stats() const {
  std::vector<std::pair<std::string, TierStats>> out;
  if (internals_->tiers == nullptr) return out;
  for (const auto& t : internals_->tiers->tiers()) out.emplace_back(t->name(), t->stats());
  return out;
}

int Engine::AddEventListener(const KvEventListener& listener) {
  const int id = internals_->next_listener_id++;
  // With several groups the manager stamps each event with its block's group.
  std::pair<int, std::vector<int>> ids{cache_->AddEventListener(listener), {}};
  if (internals_->tiers != nullptr) {
    for (const auto& t : internals_->tiers->tiers())
      ids.second.push_back(t->AddEventListener(listener));
  }
  internals_->listeners.emplace(id, std::move(ids));
  return id;
}

bool Engine::RemoveEventListener(int id) {
  auto it = internals_->listeners.find(id);
  if (it == internals_->listeners.end()) return false;
  cache_->RemoveEventListener(it->second.first);
  if (internals_->tiers != nullptr) {
    const auto& tiers = internals_->tiers->tiers();
    for (size_t i = 0; i < tiers.size() && i < it->second.second.size(); ++i) {
      tiers[i]->RemoveEventListener(it->second.second[i]);
    }
  }
  internals_->listeners.erase(it);
  return true;
}

absl::Status Engine::OnboardWaiting() {
  TierChain* tiers = internals_->tiers.get();
  std::vector<RequestId>& queue = internals_->onboard_queue;
  if (tiers == nullptr) return absl::OkStatus();
  std::erase_if(queue, [this](RequestId id) {
    auto it = requests_.find(id);
    return it == requests_.end() || !it->second->awaiting_admission;
  });
  // Every step until admitted, the requests at the front whose tokens fit twice the step's token
  // budget and whose blocks fit the pool (those the scheduler may admit now): loaded earlier, a
  // block may have been evicted again while its request waited (NoteOnboarding keeps which tier
  // loaded each block). A preempted request is looked up with its generated tokens too
  // (record.context): it recomputes them all unless they are found.
  const int64_t budget = 2 * int64_t{std::max(1, options_.scheduler.max_num_batched_tokens)};
  int64_t planned = 0;
  int64_t unmet_blocks = 0;     // blocks the requests onboarded so far still need
  int64_t running_blocks = -1;  // BlocksForRunning(), once needed
  for (RequestId id : queue) {
    RequestRecord& record = *requests_.at(id);
    if (record.sampling.prompt_logprobs >= 0) continue;  // it computes its whole prompt anyway
    const auto tokens = static_cast<int64_t>(record.context.size());
    if (planned > 0 && planned + tokens > budget) break;
    // Loads for a request that cannot fit beside the running ones (the blocks their next tokens
    // take) would only be evicted again before it is admitted: wait until the pool has room.
    const int64_t need = cache_->PeakBlocksFor(tokens, budget);
    if (running_blocks < 0) running_blocks = BlocksForRunning();
    if (need + unmet_blocks + running_blocks > cache_->NumAvailableBlocks()) break;
    planned += tokens;
    PAGEDKV_ASSIGN_OR_RETURN(
        CacheRequest request,
        cache_->NewRequest(id, record.context, {.cache_salt = record.cache_salt}));
    PAGEDKV_ASSIGN_OR_RETURN(const TierHits hits, tiers->Onboard(request));
    NoteOnboarding(hits, &record.block_sources);
    unmet_blocks +=
        need - hits.device_blocks - hits.host_blocks - hits.disk_blocks - hits.remote_blocks;
  }
  return absl::OkStatus();
}

int64_t Engine::BlocksForRunning() const {
  const int64_t bs = options_.block_size;
  const int64_t budget = std::max(1, options_.scheduler.max_num_batched_tokens);
  int64_t blocks = 0;
  for (const auto& [id, record] : requests_) {
    if (record->awaiting_admission) continue;
    const absl::StatusOr<RequestInfo> info = scheduler_->GetRequestInfo(id);
    if (!info.ok()) continue;  // finished in the scheduler, not yet reported
    const int64_t computed = info->num_computed_tokens;
    const int64_t next = std::min<int64_t>(
        info->num_prompt_tokens + int64_t{info->num_output_tokens}, computed + budget);
    blocks += NumBlocksFor(next, bs) - NumBlocksFor(computed, bs);
  }
  return blocks;
}

void Engine::RequeuePreempted() {
  if (internals_->tiers == nullptr) return;
  // The scheduler puts preempted requests at the front of its waiting queue, in this order.
  std::vector<RequestId>& queue = internals_->onboard_queue;
  std::vector<RequestId> preempted;
  for (RequestId id : batch_.preempted_request_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second->awaiting_admission) continue;
    RequestRecord& record = *it->second;
    record.awaiting_admission = true;
    record.block_sources.clear();
    preempted.push_back(id);
  }
  queue.insert(queue.begin(), preempted.rbegin(), preempted.rend());
}

}  // namespace pagedkv
