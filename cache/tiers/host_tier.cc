// Copyright 2026 The pagedkv Authors.
//
// HostTier. Invariant: entries_ and the policy's resident set hold the same hashes, and there
// are at most policy_->capacity() of them; each entry's value has options_.value_bytes bytes.
#include "pagedkv/tiers/host_tier.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

absl::StatusOr<int64_t> CapacityInBlocks(const HostTierOptions& o) {
  if (o.capacity_blocks < 0 || o.capacity_bytes < 0 || o.value_bytes < 0 || o.block_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HostTierOptions: sizes must be >= 0, got capacity_blocks ", o.capacity_blocks,
                     ", capacity_bytes ", o.capacity_bytes, ", value_bytes ", o.value_bytes,
                     ", block_size ", o.block_size));
  }
  if (o.capacity_blocks == 0 && o.capacity_bytes == 0) {
    return absl::InvalidArgumentError(
        "HostTierOptions: set capacity_blocks or capacity_bytes (both are 0)");
  }
  int64_t blocks = o.capacity_blocks > 0 ? o.capacity_blocks : INT64_MAX;
  if (o.capacity_bytes > 0) {
    if (o.value_bytes == 0) {
      return absl::InvalidArgumentError(
          "HostTierOptions: capacity_bytes needs value_bytes (the size of one block's value)");
    }
    blocks = std::min(blocks, o.capacity_bytes / o.value_bytes);
  }
  if (blocks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("HostTierOptions: capacity_bytes ",
                                                   o.capacity_bytes, " holds no block of ",
                                                   o.value_bytes, " bytes; raise it"));
  }
  return blocks;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostTier>> HostTier::Create(HostTierOptions options) {
  PAGEDKV_ASSIGN_OR_RETURN(const int64_t blocks, CapacityInBlocks(options));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<TierPolicy> policy,
                           MakeTierPolicy(options.policy, blocks));
  if (options.store.threshold < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HostTierOptions.store.threshold must be >= 0, got ", options.store.threshold));
  }
  return std::unique_ptr<HostTier>(new HostTier(std::move(options), std::move(policy)));
}

HostTier::HostTier(HostTierOptions options, std::unique_ptr<TierPolicy> policy)
    : options_(std::move(options)), policy_(std::move(policy)) {}

absl::StatusOr<int64_t> HostTier::LoadPrefix(std::span<const TierBlock> blocks,
                                             TierValueSink sink) {
  ++stats_.lookups;
  int64_t taken = 0;
  for (const TierBlock& b : blocks) {
    ++stats_.queried_blocks;
    auto it = entries_.find(b.hash);
    if (it == entries_.end()) break;
    if (!std::equal(b.tokens.begin(), b.tokens.end(), it->second.tokens.begin(),
                    it->second.tokens.end())) {
      // A hash collision or a caller bug: never hand out the value; drop the entry.
      ++stats_.faults;
      ++stats_.incidents;
      policy_->Erase(b.hash);
      DropEntry(b.hash);
      break;
    }
    const auto value = std::span<const std::byte>(it->second.value.get(),
                                                  static_cast<size_t>(options_.value_bytes));
    PAGEDKV_ASSIGN_OR_RETURN(const bool took, sink(taken, value));
    if (!took) break;
    policy_->Hit(b.hash);
    ++taken;
    ++stats_.hit_blocks;
    stats_.loaded_bytes += options_.value_bytes;
  }
  return taken;
}

absl::Status HostTier::CheckItem(const TierStoreItem& item) const {
  if (static_cast<int64_t>(item.value.size()) != options_.value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("HostTier::Store: a value of ",
                                                   item.value.size(), " bytes; this tier holds ",
                                                   options_.value_bytes, "-byte values"));
  }
  if (options_.block_size > 0 &&
      static_cast<int64_t>(item.block.tokens.size()) != options_.block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("HostTier::Store: a block of ", item.block.tokens.size(),
                     " tokens; the block size is ", options_.block_size));
  }
  return absl::OkStatus();
}

absl::Status HostTier::Store(std::span<const TierStoreItem> items) {
  for (const TierStoreItem& item : items) PAGEDKV_RETURN_IF_ERROR(CheckItem(item));
  for (const TierStoreItem& item : items) StoreOne(item);
  return absl::OkStatus();
}

void HostTier::StoreOne(const TierStoreItem& item) {
  if (entries_.contains(item.block.hash)) {
    ++stats_.store_skipped;
    return;
  }
  Entry entry;
  try {
    entry.tokens.assign(item.block.tokens.begin(), item.block.tokens.end());
    if (options_.value_bytes > 0) {
      if (spare_ != nullptr) {
        entry.value = std::move(spare_);  // an evicted block's buffer: no allocation, no faults
      } else {
        entry.value.reset(new std::byte[static_cast<size_t>(options_.value_bytes)]);
      }
      std::memcpy(entry.value.get(), item.value.data(), item.value.size());
    }
    entries_.reserve(entries_.size() + 1);
  } catch (const std::bad_alloc&) {
    ++stats_.faults;  // out of host memory: the block is simply not stored
    ++stats_.incidents;
    return;
  }
  for (const BlockHash& victim : policy_->Insert(item.block.hash)) {
    ++stats_.evictions;
    DropEntry(victim);
  }
  entries_.emplace(item.block.hash, std::move(entry));
  ++stats_.stored_blocks;
  stats_.stored_bytes += options_.value_bytes;
  if (HasListeners()) {
    Emit(KvEvent{.type = KvEventType::kBlockStored,
                 .hash = item.block.hash,
                 .token_count = static_cast<int32_t>(item.block.tokens.size()),
                 .token_ids = item.block.tokens,
                 .medium = options_.medium});
  }
}

void HostTier::DropEntry(const BlockHash& hash) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return;
  if (spare_ == nullptr) spare_ = std::move(it->second.value);
  entries_.erase(it);
  if (HasListeners()) {
    Emit(KvEvent{.type = KvEventType::kBlockRemoved, .hash = hash, .medium = options_.medium});
  }
}

TierStats HostTier::stats() const {
  TierStats s = stats_;
  s.resident_blocks = static_cast<int64_t>(entries_.size());
  s.resident_bytes = s.resident_blocks * options_.value_bytes;
  s.shared_resident_bytes = s.resident_bytes;  // this process's alone
  return s;
}

}  // namespace pagedkv
