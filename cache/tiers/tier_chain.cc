// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/tier_chain.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/kv_cache_manager_internal.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

bool WritesThrough(const KvTier& tier) {
  return tier.store_options().rule == TierStoreRule::kWriteThrough;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TierChain>> TierChain::Create(
    std::vector<std::unique_ptr<KvTier>> tiers, BlockValueIo* io, KvCacheManager* manager) {
  if (io == nullptr || manager == nullptr) {
    return absl::InvalidArgumentError("TierChain::Create: io and manager are required");
  }
  auto chain = std::make_unique<TierChain>(std::move(tiers), io,
                                           &KvCacheManagerInternal::MutablePool(*manager));
  chain->manager_ = manager;
  if (manager->num_groups() > 1) {
    for (int32_t g = 0; g < manager->num_groups(); ++g) chain->groups_.push_back(manager->group(g));
  }
  return chain;
}

TierChain::TierChain(std::vector<std::unique_ptr<KvTier>> tiers, BlockValueIo* io, BlockPool* pool,
                     PoolBlocks blocks)
    : tiers_(std::move(tiers)), io_(io), pool_(pool), pool_blocks_(blocks) {
  scratch_.resize(static_cast<size_t>(io_->value_bytes()));
  listener_id_ = pool_->AddEventListener([this](const KvEvent& e) { OnPoolEvent(e); });
}

TierChain::~TierChain() { pool_->RemoveEventListener(listener_id_); }

KvTier* TierChain::Host() const {
  for (const auto& t : tiers_) {
    if (t->name() == "host") return t.get();
  }
  return nullptr;
}

void TierChain::OnPoolEvent(const KvEvent& event) {
  if (event.block == kNullBlock) return;  // kAllBlocksCleared
  // A shifted chunk's copy is keyed by its content, not by a prefix: no tier holds it.
  if (event.domain == BlockDomain::kChunk) return;
  if (event.type == KvEventType::kBlockStored) {
    const size_t bs = static_cast<size_t>(pool_->block_size());
    if (event.token_ids.size() == bs) {
      if (block_tokens_.empty())
        block_tokens_.resize(static_cast<size_t>(pool_->num_blocks()) * bs);
      std::copy(event.token_ids.begin(), event.token_ids.end(),
                block_tokens_.begin() + static_cast<ptrdiff_t>(event.block * bs));
    }
    if (!placing_) {
      pending_.emplace_back(event.block, event.hash);
      pending_ids_.insert(event.block);
    }
    return;
  }
  if (event.type == KvEventType::kBlockRemoved) WriteBack(event);
}

void TierChain::WriteBack(const KvEvent& event) {
  // Not computed yet (cached in this step) or already failing: nothing to save.
  if (pending_ids_.contains(event.block) || !deferred_.ok()) return;
  const int32_t hits = gate_.Hits(event.hash);
  bool wanted = false;
  for (const auto& t : tiers_) wanted |= TierStoreGate::StoresWhenEvicted(t->store_options(), hits);
  if (!wanted) return;
  DeferredStore store{.hash = event.hash, .hits = hits};
  const std::span<const TokenId> tokens = TokensOf(event.block);
  store.tokens.assign(tokens.begin(), tokens.end());
  store.value.resize(static_cast<size_t>(io_->value_bytes()));
  // The KV is read now: the block is handed out (and overwritten) right after this event.
  absl::Status read = io_->Read(event.block, store.value);
  if (!read.ok()) {
    deferred_ = read;
    return;
  }
  deferred_stores_.push_back(std::move(store));
}

std::span<const TokenId> TierChain::TokensOf(BlockId block) const {
  if (block_tokens_.empty()) return {};
  const size_t bs = static_cast<size_t>(pool_->block_size());
  return std::span<const TokenId>(block_tokens_).subspan(static_cast<size_t>(block) * bs, bs);
}

std::span<const TokenId> TierChain::BlockTokens(const CacheRequest& request, int64_t i) const {
  if (pool_blocks_ == PoolBlocks::kKeys) return {};
  return request.BlockTokens(i);
}

absl::Status TierChain::FlushDeferred() {
  std::vector<DeferredStore> stores = std::move(deferred_stores_);
  deferred_stores_.clear();
  for (const auto& t : tiers_) {
    if (WritesThrough(*t)) continue;
    std::vector<TierStoreItem> items;
    for (const DeferredStore& s : stores) {
      if (!TierStoreGate::StoresWhenEvicted(t->store_options(), s.hits)) continue;
      items.push_back({.block = {.hash = s.hash, .tokens = s.tokens}, .value = s.value});
    }
    if (!items.empty()) PAGEDKV_RETURN_IF_ERROR(t->Store(items));
  }
  return deferred_;
}

absl::Status TierChain::StoreFromDevice(KvTier& tier, BlockId block, const BlockHash& hash,
                                        std::span<const TokenId> tokens) {
  PAGEDKV_RETURN_IF_ERROR(io_->Read(block, scratch_));
  const TierStoreItem item{.block = {.hash = hash, .tokens = tokens}, .value = scratch_};
  return tier.Store(std::span<const TierStoreItem>(&item, 1));
}

absl::StatusOr<int64_t> TierChain::DeviceHits(const CacheRequest& request, int32_t g, int64_t begin,
                                              int64_t limit) {
  // Linked: a chain from the last block of this walk; unlinked: each block's parent hash.
  const bool linked = Linked();
  BlockId prev = linked ? last_placed_ : kNullBlock;
  int64_t i = begin;
  for (; i < limit; ++i) {
    const BlockHash hash = GroupBlockHash(request, g, i);
    const BlockId b = pool_->FindCached(hash);
    if (b == kNullBlock ||
        !pool_->MatchesChain(b, GroupParentHash(request, g, i), BlockTokens(request, i),
                             request.BlockExtraDigest(i), prev)) {
      break;
    }
    const int32_t hits = gate_.NoteHit(hash);
    for (const auto& t : tiers_) {
      if (TierStoreGate::StoresAtHit(t->store_options(), hits)) {
        PAGEDKV_RETURN_IF_ERROR(StoreFromDevice(*t, b, hash, BlockTokens(request, i)));
      }
    }
    unpinned_hits_.push_back(b);
    if (linked) prev = b;
    last_placed_ = b;
  }
  return i - begin;
}

absl::StatusOr<TierHits> TierChain::Onboard(const CacheRequest& request) {
  const int64_t limit = std::min<int64_t>(request.num_full_blocks(),
                                          (request.num_tokens() - 1) / pool_->block_size());
  unpinned_hits_.clear();
  absl::StatusOr<TierHits> hits =
      groups_.empty() ? OnboardPrefix(request, 0, limit) : OnboardGroups(request, limit);
  // One fence for the request's loads: compute queued from now on (the next forward) reads them.
  if (unfenced_writes_) {
    unfenced_writes_ = false;
    PAGEDKV_RETURN_IF_ERROR(io_->FenceWrites());
  }
  PAGEDKV_RETURN_IF_ERROR(hits.status());
  PAGEDKV_RETURN_IF_ERROR(FlushDeferred());
  return hits;
}

absl::StatusOr<TierHits> TierChain::OnboardPrefix(const CacheRequest& request, int32_t g,
                                                  int64_t limit) {
  TierHits hits;
  last_placed_ = kNullBlock;
  PAGEDKV_ASSIGN_OR_RETURN(hits.device_blocks, DeviceHits(request, g, 0, limit));
  int64_t next = hits.device_blocks;
  for (const auto& t : tiers_) {
    if (next >= limit) break;
    PAGEDKV_ASSIGN_OR_RETURN(const int64_t n, LoadFrom(*t, request, g, limit, &next));
    if (t->name() == "host") hits.host_blocks += n;
    if (t->name() == "remote") hits.remote_blocks += n;
    if (t->name() == "disk") hits.disk_blocks += n;
  }
  return hits;
}

absl::StatusOr<TierHits> TierChain::OnboardGroups(const CacheRequest& request, int64_t limit) {
  std::optional<TierHits> first;
  int64_t end = limit;
  for (int32_t g = 0; g < static_cast<int32_t>(groups_.size()); ++g) {
    if (groups_[g].kind != KvCacheGroupKind::kFullAttention) continue;
    PAGEDKV_ASSIGN_OR_RETURN(const TierHits hits, OnboardPrefix(request, g, end));
    if (!first.has_value()) first = hits;
    end = std::min(end,
                   hits.device_blocks + hits.host_blocks + hits.disk_blocks + hits.remote_blocks);
  }
  const int64_t bs = pool_->block_size();
  for (int32_t g = 0; g < static_cast<int32_t>(groups_.size()); ++g) {
    if (groups_[g].kind != KvCacheGroupKind::kSlidingWindow) continue;
    const int64_t window_blocks = (groups_[g].sliding_window - 1 + bs - 1) / bs;
    PAGEDKV_RETURN_IF_ERROR(
        OnboardWindow(request, g, std::max<int64_t>(0, end - window_blocks), end));
  }
  return first.value_or(TierHits{});
}

absl::Status TierChain::OnboardWindow(const CacheRequest& request, int32_t g, int64_t begin,
                                      int64_t end) {
  int64_t next = begin;
  while (next < end) {
    PAGEDKV_ASSIGN_OR_RETURN(const int64_t on_device, DeviceHits(request, g, next, end));
    next += on_device;
    int64_t loaded = 0;
    for (const auto& t : tiers_) {
      if (next >= end) break;
      PAGEDKV_ASSIGN_OR_RETURN(const int64_t n, LoadFrom(*t, request, g, end, &next));
      loaded += n;
    }
    if (on_device == 0 && loaded == 0) break;  // block `next` is nowhere
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TierChain::LoadFrom(KvTier& tier, const CacheRequest& request, int32_t g,
                                            int64_t limit, int64_t* next) {
  const int64_t start = *next;
  std::vector<TierBlock> blocks;
  blocks.reserve(static_cast<size_t>(limit - start));
  for (int64_t i = start; i < limit; ++i) {
    blocks.push_back({.hash = GroupBlockHash(request, g, i), .tokens = BlockTokens(request, i)});
  }
  KvTier* host = Host();
  PAGEDKV_ASSIGN_OR_RETURN(
      const int64_t n,
      tier.LoadPrefix(
          blocks, [&](int64_t j, std::span<const std::byte> value) -> absl::StatusOr<bool> {
            PAGEDKV_ASSIGN_OR_RETURN(const bool placed, Place(request, g, start + j, value));
            if (placed && host != nullptr && host != &tier) {
              // A remote hit is kept in the host tier too (it is now one copy away).
              const TierStoreItem item{.block = blocks[static_cast<size_t>(j)], .value = value};
              PAGEDKV_RETURN_IF_ERROR(host->Store(std::span<const TierStoreItem>(&item, 1)));
            }
            return placed;
          }));
  *next += n;
  return n;
}

absl::StatusOr<bool> TierChain::Place(const CacheRequest& request, int32_t g, int64_t i,
                                      std::span<const std::byte> value) {
  // The device hits so far stay put while blocks are allocated.
  for (BlockId b : unpinned_hits_) {
    PAGEDKV_RETURN_IF_ERROR(pool_->Pin(b));
    pins_.push_back(b);
  }
  unpinned_hits_.clear();
  // Leave room for the rest of the request (each group's share): its uncached blocks, and one
  // for the last token.
  const int64_t bs = pool_->block_size();
  const int64_t still_needed = ((request.num_tokens() + bs - 1) / bs - (i + 1)) *
                               std::max<int64_t>(1, static_cast<int64_t>(groups_.size()));
  const BlockHash hash = GroupBlockHash(request, g, i);
  if (pool_->NumAvailableBlocks() < 1 + still_needed || pool_->FindCached(hash) != kNullBlock) {
    return false;
  }
  PAGEDKV_ASSIGN_OR_RETURN(const BlockId b, pool_->Allocate());
  unfenced_writes_ = true;  // even when it fails part-way: a copy may be queued
  if (absl::Status w = io_->WriteAsync(b, value); !w.ok()) {
    PAGEDKV_RETURN_IF_ERROR(pool_->Unpin(b));
    return w;
  }
  if (!groups_.empty()) KvCacheManagerInternal::NoteBlockGroup(*manager_, b, g);
  placing_ = true;
  absl::StatusOr<bool> inserted =
      pool_->Insert({.block = b,
                     .hash = hash,
                     .parent_hash = GroupParentHash(request, g, i),
                     .tokens = BlockTokens(request, i),
                     .parent_block = Linked() ? last_placed_ : kNullBlock,
                     .extra_digest = request.BlockExtraDigest(i)});
  placing_ = false;
  if (!inserted.ok() || !*inserted) {
    PAGEDKV_RETURN_IF_ERROR(pool_->Unpin(b));
    if (!inserted.ok()) return inserted.status();
    return false;
  }
  pins_.push_back(b);
  last_placed_ = b;
  return true;
}

absl::Status TierChain::ReleasePins() {
  std::vector<BlockId> pins = std::move(pins_);
  pins_.clear();
  std::reverse(pins.begin(), pins.end());
  PAGEDKV_RETURN_IF_ERROR(pool_->Unpin(pins));
  return FlushDeferred();
}

absl::Status TierChain::FlushWriteThrough() {
  std::vector<std::pair<BlockId, BlockHash>> pending = std::move(pending_);
  pending_.clear();
  pending_ids_.clear();
  std::vector<KvTier*> targets;
  for (const auto& t : tiers_) {
    if (TierStoreGate::StoresWhenCached(t->store_options())) targets.push_back(t.get());
  }
  if (targets.empty() || pending.empty()) {
    // The step's loads are done (the forward waited for them): their staging may be reused.
    PAGEDKV_RETURN_IF_ERROR(io_->SynchronizeCopies());
    return FlushDeferred();
  }
  const size_t value_bytes = static_cast<size_t>(io_->value_bytes());
  std::vector<std::byte> values(pending.size() * value_bytes);
  std::vector<TierStoreItem> items;
  for (size_t k = 0; k < pending.size(); ++k) {
    const auto& [block, hash] = pending[k];
    if (pool_->FindCached(hash) != block) continue;  // removed again before it was computed
    const auto value =
        std::span<std::byte>(values).subspan(items.size() * value_bytes, value_bytes);
    if (absl::Status read = io_->ReadAsync(block, value); !read.ok()) {  // after the compute
      read.Update(io_->SynchronizeCopies());  // nothing may land in `values` after it is gone
      return read;
    }
    items.push_back({.block = {.hash = hash, .tokens = TokensOf(block)}, .value = value});
  }
  // The values are the tier's only once the copies completed.
  PAGEDKV_RETURN_IF_ERROR(io_->SynchronizeCopies());
  for (KvTier* t : targets) PAGEDKV_RETURN_IF_ERROR(t->Store(items));
  return FlushDeferred();
}

}  // namespace pagedkv
