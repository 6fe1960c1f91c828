// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/chunk_index.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/debug_check.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace {

void AppendU64(std::string* out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void AppendString(std::string* out, std::string_view s) {
  AppendU64(out, s.size());
  out->append(s);
}

BlockHash HashString(const std::string& bytes) {
  return Xxh3Hash128(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
}

// Hash a chunk's uncached block i is indexed under: unique per registration (serial).
BlockHash ChunkBlockHash(const BlockHash& key, uint64_t serial, size_t i) {
  std::string bytes = "pagedkv-chunk-block-v1";
  AppendU64(&bytes, key.low);
  AppendU64(&bytes, key.high);
  AppendU64(&bytes, serial);
  AppendU64(&bytes, i);
  return HashString(bytes);
}

}  // namespace

BlockHash ChunkKey(std::span<const TokenId> tokens, const ChunkKeyParts& parts) {
  std::string bytes = "pagedkv-chunk-v1";
  bytes.reserve(bytes.size() + 64 + parts.model_fingerprint.size() + parts.rope_fingerprint.size() +
                parts.cache_salt.size() + 4 * tokens.size());
  AppendString(&bytes, parts.model_fingerprint);
  AppendString(&bytes, parts.rope_fingerprint);
  AppendString(&bytes, parts.cache_salt);
  AppendU64(&bytes, parts.adapter_id);
  AppendU64(&bytes, tokens.size());
  for (TokenId t : tokens) {
    const auto u = static_cast<uint32_t>(t);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  }
  return HashString(bytes);
}

absl::StatusOr<std::unique_ptr<ChunkIndex>> ChunkIndex::Create(BlockPool* pool,
                                                               const ChunkIndexOptions& options) {
  if (pool == nullptr) return absl::InvalidArgumentError("ChunkIndex::Create: pool is null");
  return std::unique_ptr<ChunkIndex>(new ChunkIndex(pool, options));
}

ChunkIndex::ChunkIndex(BlockPool* pool, const ChunkIndexOptions& options)
    : pool_(pool), options_(options) {
  listener_id_ = pool_->AddEventListener([this](const KvEvent& event) { OnPoolEvent(event); });
}

ChunkIndex::~ChunkIndex() { pool_->RemoveEventListener(listener_id_); }

void ChunkIndex::OnPoolEvent(const KvEvent& event) {
  if (event.type == KvEventType::kAllBlocksCleared) {
    stats_.invalidations += static_cast<int64_t>(chunks_.size());
    std::vector<BlockHash> keys;
    keys.reserve(chunks_.size());
    for (const auto& [key, entry] : chunks_) keys.push_back(key);
    chunks_.clear();
    block_chunks_.clear();
    if (drop_listener_) {
      for (const BlockHash& key : keys) drop_listener_(key);
    }
    return;
  }
  if (event.type != KvEventType::kBlockRemoved) return;
  const auto it = block_chunks_.find(event.block);
  if (it == block_chunks_.end()) return;
  const std::vector<BlockHash> keys = it->second;  // Drop edits the map
  for (const BlockHash& key : keys) {
    const auto chunk = chunks_.find(key);
    if (chunk == chunks_.end()) continue;
    const Entry entry = chunk->second;  // a copy: Drop reads and erases the original
    Drop(key);
    ++stats_.invalidations;
    FreeOrphanedCopies(entry, event.block);
  }
}

void ChunkIndex::FreeOrphanedCopies(const Entry& entry, BlockId removed) {
  // Uncache emits kBlockRemoved, re-entering OnPoolEvent: the block is no longer in
  // block_chunks_ (checked below), so that call does nothing.
  for (size_t i = 0; i < entry.location.blocks.size(); ++i) {
    const BlockId block = entry.location.blocks[i];
    if (!entry.own_copy[i] || block == removed || block_chunks_.contains(block)) continue;
    if (!pool_->IsCached(block) || pool_->Generation(block) != entry.generations[i] ||
        pool_->RefCount(block) != 0) {
      continue;
    }
    if (pool_->Uncache(block).ok()) ++stats_.orphans_freed;
  }
}

void ChunkIndex::Drop(const BlockHash& key) {
  const auto it = chunks_.find(key);
  if (it == chunks_.end()) return;
  for (BlockId block : it->second.location.blocks) {
    const auto b = block_chunks_.find(block);
    if (b == block_chunks_.end()) continue;
    std::vector<BlockHash>& keys = b->second;
    keys.erase(std::remove(keys.begin(), keys.end(), key), keys.end());
    if (keys.empty()) block_chunks_.erase(b);
  }
  const BlockHash dropped = key;  // `key` may be the erased entry's own
  chunks_.erase(it);
  if (drop_listener_) drop_listener_(dropped);
}

bool ChunkIndex::StillValid(const Entry& entry) const {
  for (size_t i = 0; i < entry.location.blocks.size(); ++i) {
    const BlockId block = entry.location.blocks[i];
    if (!pool_->IsCached(block) || pool_->Generation(block) != entry.generations[i]) return false;
  }
  return true;
}

absl::Status ChunkIndex::ValidateInsert(const ChunkInsert& insert) const {
  const std::span<const TokenId> tokens = insert.tokens;
  const int32_t position = insert.position;
  const std::span<const BlockId> blocks = insert.blocks;
  const int32_t start_offset = insert.start_offset;
  const int32_t bs = pool_->block_size();
  if (tokens.empty()) return absl::InvalidArgumentError("ChunkIndex::Insert: the chunk is empty");
  if (position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChunkIndex::Insert: position must be >= 0, got ", position));
  }
  if (start_offset < 0 || start_offset >= bs) {
    return absl::InvalidArgumentError(absl::StrCat("ChunkIndex::Insert: start_offset ",
                                                   start_offset,
                                                   " must lie in [0, block_size = ", bs, ")"));
  }
  const int64_t needed =
      NumBlocksFor(int64_t{start_offset} + static_cast<int64_t>(tokens.size()), bs);
  if (static_cast<int64_t>(blocks.size()) != needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ChunkIndex::Insert: ", tokens.size(), " tokens from slot offset ", start_offset,
        " span exactly ", needed, " blocks of ", bs, ", got ", blocks.size()));
  }
  if (static_cast<int64_t>(tokens.size()) + position > INT32_MAX) {
    return absl::InvalidArgumentError("ChunkIndex::Insert: positions overflow int32");
  }
  absl::flat_hash_set<BlockId> seen;
  for (BlockId block : blocks) {
    if (block < 0 || block >= pool_->num_blocks()) {
      return absl::InvalidArgumentError(absl::StrCat("ChunkIndex::Insert: block ", block,
                                                     " is outside [0, ", pool_->num_blocks(), ")"));
    }
    if (!seen.insert(block).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ChunkIndex::Insert: block ", block, " is listed twice"));
    }
    if (pool_->RefCount(block) <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ChunkIndex::Insert: block ", block,
          " is not held by the caller (reference count 0); pass blocks that hold the chunk's KV"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> ChunkIndex::CacheChunkBlocks(const BlockHash& key,
                                                                  std::span<const BlockId> blocks) {
  // Cache the uncached blocks under chunk-domain hashes; roll back on a (never expected) clash.
  const uint64_t serial = next_serial_++;
  std::vector<BlockId> newly_cached;
  std::vector<uint8_t> own_copy(blocks.size(), 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (pool_->IsCached(blocks[i])) continue;
    const BlockHash hash = ChunkBlockHash(key, serial, i);
    absl::StatusOr<bool> inserted = pool_->Insert(
        {.block = blocks[i], .hash = hash, .parent_hash = key, .domain = BlockDomain::kChunk});
    if (!inserted.ok() || !*inserted) {
      for (BlockId b : newly_cached) DebugCheckOk(pool_->Uncache(b), "cached just above");
      if (!inserted.ok()) return inserted.status();
      return absl::InternalError(
          absl::StrCat("ChunkIndex::Insert: chunk block hash ", hash.ToString(), " is taken"));
    }
    newly_cached.push_back(blocks[i]);
    own_copy[i] = 1;
  }
  return own_copy;
}

absl::StatusOr<bool> ChunkIndex::Insert(const ChunkInsert& insert) {
  PAGEDKV_RETURN_IF_ERROR(ValidateInsert(insert));
  const BlockHash& key = insert.key;
  const std::span<const TokenId> tokens = insert.tokens;
  const std::span<const BlockId> blocks = insert.blocks;
  if (const auto it = chunks_.find(key); it != chunks_.end()) {
    if (StillValid(it->second)) return false;
    Drop(key);  // unreachable while the listener works; kept as a safety net
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<uint8_t> own_copy, CacheChunkBlocks(key, blocks));
  Entry entry;
  entry.location.key = key;
  entry.location.blocks.assign(blocks.begin(), blocks.end());
  entry.location.start_offset = insert.start_offset;
  entry.location.num_tokens = static_cast<int32_t>(tokens.size());
  entry.location.position = insert.position;
  entry.generations.reserve(blocks.size());
  for (BlockId block : blocks) entry.generations.push_back(pool_->Generation(block));
  entry.own_copy = std::move(own_copy);
  if (options_.verify_tokens) entry.tokens.assign(tokens.begin(), tokens.end());
  for (BlockId block : blocks) block_chunks_[block].push_back(key);
  chunks_.emplace(key, std::move(entry));
  ++stats_.inserts;
  return true;
}

absl::StatusOr<ChunkCopyResult> ChunkIndex::InsertCopy(
    const ChunkCopy& copy, absl::FunctionRef<absl::Status(std::span<const BlockId>)> fill) {
  if (copy.tokens.empty() || copy.position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ChunkIndex::InsertCopy: need a non-empty chunk at a position >= 0 (got ",
                     copy.tokens.size(), " tokens at ", copy.position, ")"));
  }
  if (Contains(copy.key)) return ChunkCopyResult::kAlreadyRegistered;
  const int64_t num_blocks =
      NumBlocksFor(static_cast<int64_t>(copy.tokens.size()), pool_->block_size());
  std::vector<BlockId> blocks;
  if (num_blocks > pool_->NumAvailableBlocks() ||
      !pool_->Allocate(static_cast<int32_t>(num_blocks), &blocks).ok()) {
    return ChunkCopyResult::kNoRoom;  // the chunk is simply not cached
  }
  absl::Status status = fill(blocks);
  bool inserted = false;
  if (status.ok()) {
    absl::StatusOr<bool> result = Insert({.key = copy.key,
                                          .tokens = copy.tokens,
                                          .position = copy.position,
                                          .blocks = blocks,
                                          .start_offset = 0});
    if (result.ok()) inserted = *result;
    status = result.status();
  }
  const std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  status.Update(pool_->Unpin(tail_first));  // pinned by Allocate just above
  PAGEDKV_RETURN_IF_ERROR(status);
  return inserted ? ChunkCopyResult::kInserted : ChunkCopyResult::kAlreadyRegistered;
}

std::optional<ChunkLocation> ChunkIndex::Find(const BlockHash& key,
                                              std::span<const TokenId> tokens) {
  ++stats_.lookups;
  const auto it = chunks_.find(key);
  if (it == chunks_.end()) return std::nullopt;
  const Entry& entry = it->second;
  if (!StillValid(entry)) return std::nullopt;
  if (static_cast<int64_t>(tokens.size()) != entry.location.num_tokens) return std::nullopt;
  if (options_.verify_tokens && !std::equal(tokens.begin(), tokens.end(), entry.tokens.begin())) {
    return std::nullopt;
  }
  ++stats_.hits;
  stats_.hit_tokens += entry.location.num_tokens;
  return entry.location;
}

absl::Status ChunkIndex::Acquire(const ChunkLocation& location) {
  const auto it = chunks_.find(location.key);
  if (it == chunks_.end() || it->second.location.blocks != location.blocks ||
      it->second.location.start_offset != location.start_offset ||
      it->second.location.num_tokens != location.num_tokens ||
      it->second.location.position != location.position || !StillValid(it->second)) {
    return absl::FailedPreconditionError(
        absl::StrCat("ChunkIndex::Acquire: chunk ", location.key.ToString(),
                     " is no longer cached with these blocks (evicted or replaced since Find); "
                     "compute its tokens instead"));
  }
  for (size_t i = 0; i < location.blocks.size(); ++i) {
    absl::Status pinned = pool_->Pin(location.blocks[i]);
    if (!pinned.ok()) {  // unreachable for cached blocks; undo to leave state as it was
      std::vector<BlockId> undo(location.blocks.begin(),
                                location.blocks.begin() + static_cast<std::ptrdiff_t>(i));
      std::reverse(undo.begin(), undo.end());
      DebugCheckOk(pool_->Unpin(undo), "pinned just above");
      return pinned;
    }
  }
  return absl::OkStatus();
}

absl::Status ChunkIndex::Release(const ChunkLocation& location) {
  std::vector<BlockId> tail_first(location.blocks.rbegin(), location.blocks.rend());
  for (BlockId block : tail_first) {
    if (block < 0 || block >= pool_->num_blocks()) {
      return absl::InvalidArgumentError(absl::StrCat("ChunkIndex::Release: block ", block,
                                                     " is outside [0, ", pool_->num_blocks(), ")"));
    }
  }
  absl::Status unpinned = pool_->Unpin(tail_first);
  if (!unpinned.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("ChunkIndex::Release: ", unpinned.message(), " (not acquired?)"));
  }
  return absl::OkStatus();
}

absl::Status ChunkIndex::Erase(const BlockHash& key) {
  if (!chunks_.contains(key)) {
    return absl::NotFoundError(
        absl::StrCat("ChunkIndex::Erase: chunk ", key.ToString(), " is not registered"));
  }
  Drop(key);
  return absl::OkStatus();
}

int32_t ChunkIndex::NumChunksUsing(BlockId block) const {
  const auto it = block_chunks_.find(block);
  return it == block_chunks_.end() ? 0 : static_cast<int32_t>(it->second.size());
}

absl::Status ChunkIndex::ValidateInvariants() const {
  size_t references = 0;
  for (const auto& [key, entry] : chunks_) {
    if (!StillValid(entry)) {
      return absl::InternalError(
          absl::StrCat("chunk ", key.ToString(), " names a block that left the pool's index"));
    }
    for (BlockId block : entry.location.blocks) {
      const auto b = block_chunks_.find(block);
      if (b == block_chunks_.end() ||
          std::find(b->second.begin(), b->second.end(), key) == b->second.end()) {
        return absl::InternalError(absl::StrCat("block ", block, " of chunk ", key.ToString(),
                                                " is missing from the block map"));
      }
    }
    references += entry.location.blocks.size();
  }
  size_t mapped = 0;
  for (const auto& [block, keys] : block_chunks_) {
    for (const BlockHash& key : keys) {
      if (!chunks_.contains(key)) {
        return absl::InternalError(
            absl::StrCat("block ", block, " maps to unregistered chunk ", key.ToString()));
      }
    }
    mapped += keys.size();
  }
  if (mapped != references) {
    return absl::InternalError(
        absl::StrCat("block map holds ", mapped, " references, chunks ", references));
  }
  return pool_->ValidateInvariants();
}

}  // namespace pagedkv
