// Copyright 2026 The pagedkv Authors.
//
// Cache-mode replay over a KvCacheManager of KV cache groups: see manager_replay.h.
#include "engine/tools/replay/cache_mode/manager_replay.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

// A well-mixed 31-bit token from two words.
TokenId MixToken(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return static_cast<TokenId>(x & 0x7fffffff);
}

// Request r's prompt: block_size tokens per key, then its tokens in no full block.
std::vector<TokenId> RequestTokens(const ExpandedWorkload& e, size_t r, int32_t block_size) {
  std::vector<TokenId> tokens;
  const auto keys = e.RequestKeys(r);
  tokens.reserve(static_cast<size_t>(std::max<int64_t>(e.input_tokens[r], 0)));
  for (const BlockHash& key : keys) {
    for (int32_t k = 0; k < block_size; ++k) tokens.push_back(MixToken(key.low + k, key.high));
  }
  for (int64_t k = static_cast<int64_t>(tokens.size()); k < e.input_tokens[r]; ++k) {
    tokens.push_back(MixToken(~static_cast<uint64_t>(r), static_cast<uint64_t>(k)));
  }
  return tokens;
}

// Looks up and allocates `req`'s prompt: the tokens its prefix hit covers, or nothing when the
// pool refused it.
std::optional<int64_t> AdmitPrompt(KvCacheManager& m, CacheRequest& req) {
  absl::StatusOr<ComputedBlocks> hit = m.GetComputedBlocks(req);
  if (!hit.ok() || !m.AllocateSlots(req, req.num_tokens() - hit->num_computed_tokens, *hit).ok()) {
    return std::nullopt;
  }
  return hit->num_computed_tokens;
}

// Counts the blocks the tier walk loaded that the prefix hit of `hit_tokens` tokens covers.
void CountTierHits(const TierHits& loaded, int64_t hit_tokens, int64_t block_size,
                   CacheReplayResult& result) {
  const int64_t past_device = hit_tokens / block_size - loaded.device_blocks;
  const int64_t host = std::clamp<int64_t>(past_device, 0, loaded.host_blocks);
  const int64_t disk = std::clamp<int64_t>(past_device - host, 0, loaded.disk_blocks);
  const int64_t remote = std::clamp<int64_t>(past_device - host - disk, 0, loaded.remote_blocks);
  result.host_hit_tokens += host * block_size;
  result.disk_hit_tokens += disk * block_size;
  result.remote_hit_tokens += remote * block_size;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ManagerReplayer>> ManagerReplayer::Create(
    const ExpandedWorkload& w, const CacheReplayOptions& options, CacheReplayResult& result) {
  if (options.decode_tokens < 0) {
    return absl::InvalidArgumentError(
        "cache replay over KV cache groups: decode_tokens must be >= 0");
  }
  if (options.policy == "belady") {
    return absl::InvalidArgumentError(
        "cache replay over KV cache groups (--hybrid-kv) takes lru, lfu or fifo, not belady");
  }
  auto replayer = std::unique_ptr<ManagerReplayer>(new ManagerReplayer(w, options, result));
  PAGEDKV_ASSIGN_OR_RETURN(
      replayer->manager_,
      KvCacheManager::Create({.num_blocks = static_cast<int32_t>(options.capacity_blocks),
                              .block_size = w.block_size,
                              .eviction_policy = options.policy,
                              .groups = options.groups}));
  const ServeTierOptions tiers{.host_capacity_blocks = options.host_capacity_blocks,
                               .remote_capacity_blocks = options.remote_capacity_blocks,
                               .disk_capacity_blocks = options.disk_capacity_blocks,
                               .policy = options.tier_policy,
                               .host_store = options.host_store,
                               .host_store_threshold = options.host_store_threshold};
  if (tiers.enabled()) {
    PAGEDKV_ASSIGN_OR_RETURN(
        replayer->tiers_, ServeTiers::Create(tiers, replayer->manager_.get(), /*block_bytes=*/0));
  }
  if (options.count_shifted && w.has_chunks()) {
    // Hash-level replay has no tokens to compare: keys alone identify chunks.
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index,
                             replayer->manager_->AttachChunkIndex({.verify_tokens = false}));
    PAGEDKV_ASSIGN_OR_RETURN(replayer->chunks_,
                             ChunkReplay::Create(std::move(index),
                                                 /*belady=*/nullptr, options.groups));
  }
  result.shifted_counted = replayer->chunks_ != nullptr;
  result.kv_groups = KvGroupsRow{.groups = KvCacheGroupsText(options.groups)};
  return replayer;
}

absl::StatusOr<int64_t> ManagerReplayer::Admit(size_t r, CacheRequest& req) {
  TierHits loaded;
  if (tiers_ != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(loaded, tiers_->Onboard(req));
  }
  const std::optional<int64_t> hit_tokens = AdmitPrompt(*manager_, req);
  if (tiers_ != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(tiers_->ReleasePins());
    PAGEDKV_RETURN_IF_ERROR(tiers_->FlushWriteThrough());  // the prompt is computed
  }
  if (!hit_tokens.has_value()) return -1;
  CountTierHits(loaded, *hit_tokens, manager_->block_size(), result_);
  if (chunks_ != nullptr) {
    const auto first = static_cast<size_t>(w_.chunk_begin[r]);
    const auto count = static_cast<size_t>(w_.chunk_begin[r + 1]) - first;
    PAGEDKV_RETURN_IF_ERROR(chunks_->CountRequest(std::span(w_.chunks).subspan(first, count),
                                                  *hit_tokens, manager_->block_size(), result_));
  }
  return *hit_tokens;
}

void ManagerReplayer::Decode(CacheRequest& req, int64_t decode_tokens, int64_t prefill) {
  const RequestId id = req.id();
  for (int64_t s = 0; s < decode_tokens; ++s) {
    if (!req.AppendToken(MixToken(id, static_cast<uint64_t>(s))).ok() ||
        !manager_->AllocateSlots(req, 1).ok())
      break;
  }
  const int64_t decode = manager_->NumHeldLayerBlocks(id).value_or(0);
  prefill_sum_ += static_cast<double>(prefill);
  decode_sum_ += static_cast<double>(decode);
  ++admitted_;
  KvGroupsRow& row = *result_.kv_groups;
  row.peak_prefill_layer_blocks = std::max(row.peak_prefill_layer_blocks, prefill);
  row.peak_decode_layer_blocks = std::max(row.peak_decode_layer_blocks, decode);
}

void ManagerReplayer::WaitFor(const std::atomic<int64_t>& ready, size_t r) const {
  while (ready.load(std::memory_order_acquire) <= static_cast<int64_t>(r)) {
    std::this_thread::yield();
  }
}

absl::Status ManagerReplayer::ReplayRequest(size_t r) {
  const RequestId id = r + 1;
  const int64_t decode_tokens =
      r < options_.output_tokens.size() ? options_.output_tokens[r] : options_.decode_tokens;
  absl::StatusOr<CacheRequest> req = manager_->NewRequest(id, RequestTokens(w_, r, w_.block_size));
  bool admitted = req.ok();
  if (admitted) {
    PAGEDKV_ASSIGN_OR_RETURN(const int64_t hit_tokens, Admit(r, *req));
    admitted = hit_tokens >= 0;
  }
  if (admitted) {
    Decode(*req, decode_tokens, manager_->NumHeldLayerBlocks(id).value_or(0));
    admitted = manager_->Free(id).ok();
  }
  if (!admitted) ++result_.kv_groups->refused;
  return absl::OkStatus();
}

void ManagerReplayer::Finish() {
  const CacheStats stats = manager_->stats();
  result_.total_tokens = stats.queried_tokens;
  result_.hit_tokens = stats.hit_tokens;
  result_.evictions = stats.evictions;
  if (admitted_ > 0) {
    result_.kv_groups->mean_prefill_layer_blocks = prefill_sum_ / static_cast<double>(admitted_);
    result_.kv_groups->mean_decode_layer_blocks = decode_sum_ / static_cast<double>(admitted_);
  }
}

}  // namespace pagedkv::replay
