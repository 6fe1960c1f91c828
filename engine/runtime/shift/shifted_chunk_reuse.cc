// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/shifted_chunk_reuse.h"

#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace {

// InvalidArgument naming the first option of `options` that is out of range (with or without a
// mover); OK when they are all valid.
absl::Status ValidateOptions(const ShiftedChunkReuseOptions& options, bool has_mover) {
  if (options.first_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShiftedChunkReuse: first_k (tokens recomputed per chunk) must be >= 0, got ",
                     options.first_k));
  }
  if (!(options.recompute_fraction >= 0.0 && options.recompute_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShiftedChunkReuse: recompute_fraction must be in [0, 1], got ",
                     options.recompute_fraction));
  }
  if (options.recompute_fraction > 0.0 && !has_mover) {
    return absl::InvalidArgumentError(
        "ShiftedChunkReuse: recompute_fraction > 0 (CacheBlend) needs a ChunkKvMover: without "
        "one there is no KV to recompute; set it to 0");
  }
  if (options.deviation_layer < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse: deviation_layer must be >= 0, got ", options.deviation_layer));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShiftedChunkReuse>> ShiftedChunkReuse::Create(
    std::unique_ptr<ChunkIndex> index, std::unique_ptr<ChunkKvMover> mover,
    const ShiftedChunkReuseOptions& options) {
  if (index == nullptr) {
    return absl::InvalidArgumentError("ShiftedChunkReuse::Create: the index is null");
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateOptions(options, mover != nullptr));
  return std::unique_ptr<ShiftedChunkReuse>(
      new ShiftedChunkReuse(std::move(index), std::move(mover), options));
}

ShiftedChunkReuse::ShiftedChunkReuse(std::unique_ptr<ChunkIndex> index,
                                     std::unique_ptr<ChunkKvMover> mover,
                                     const ShiftedChunkReuseOptions& options)
    : options_(options),
      mover_(std::move(mover)),
      rope_fingerprint_(mover_ != nullptr ? mover_->RopeFingerprint()
                                          : std::string(kNoMoverRopeFingerprint)),
      index_(std::move(index)),
      pins_(index_.get()) {}

ShiftedChunkReuse::~ShiftedChunkReuse() = default;

BlockHash ShiftedChunkReuse::KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                                   uint64_t adapter_id) const {
  return ChunkKey(tokens, {.cache_salt = cache_salt,
                           .adapter_id = adapter_id,
                           .rope_fingerprint = rope_fingerprint_,
                           .model_fingerprint = options_.model_fingerprint});
}

std::optional<AcquiredChunk> ShiftedChunkReuse::Acquire(std::span<const TokenId> tokens,
                                                        std::string_view cache_salt,
                                                        uint64_t adapter_id) {
  std::optional<AcquiredChunk> chunk = pins_.Acquire(KeyOf(tokens, cache_salt, adapter_id), tokens);
  if (chunk.has_value()) ++stats_.acquired;
  return chunk;
}

void ShiftedChunkReuse::Release(int64_t handle) {
  if (pins_.Release(handle)) ++stats_.released_unused;
}

absl::Status ShiftedChunkReuse::RunMoves(std::span<const KvSlotMove> moves) {
  absl::Status status;
  if (mover_ != nullptr && !moves.empty()) status = mover_->MoveSlots(moves);
  status.Update(pins_.ReleaseAll());
  return status;
}

absl::StatusOr<bool> ShiftedChunkReuse::Register(std::span<const TokenId> tokens,
                                                 std::string_view cache_salt, uint64_t adapter_id,
                                                 int32_t position, std::span<const int64_t> slots) {
  const bool slots_fit = slots.size() == tokens.size() || (mover_ == nullptr && slots.empty());
  if (tokens.empty() || position < 0 || !slots_fit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse::Register: need a non-empty chunk at a position >= 0 with one slot "
        "per token (none without a mover); got ",
        tokens.size(), " tokens at ", position, " with ", slots.size(), " slots"));
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      const ChunkCopyResult result,
      index_->InsertCopy(
          {.key = KeyOf(tokens, cache_salt, adapter_id), .tokens = tokens, .position = position},
          [&](std::span<const BlockId> blocks) { return CopyInto(blocks, slots, position); }));
  Count(result, static_cast<int64_t>(tokens.size()));
  return result == ChunkCopyResult::kInserted;
}

absl::Status ShiftedChunkReuse::CopyInto(std::span<const BlockId> blocks,
                                         std::span<const int64_t> slots, int32_t position) const {
  if (mover_ == nullptr) return absl::OkStatus();  // no KV to write
  const int32_t bs = index_->pool().block_size();
  std::vector<int64_t> dst;
  dst.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto token = static_cast<int32_t>(i);
    dst.push_back(int64_t{blocks[static_cast<size_t>(token / bs)]} * bs + token % bs);
  }
  return mover_->CopySlots(slots, dst, position);
}

std::span<const TokenId> ShiftedChunkReuse::Placeholder(int32_t num_tokens) {
  if (placeholder_.size() < static_cast<size_t>(num_tokens)) {
    placeholder_.resize(static_cast<size_t>(num_tokens), 0);
  }
  return std::span<const TokenId>(placeholder_).first(static_cast<size_t>(num_tokens));
}

absl::StatusOr<std::optional<int32_t>> ShiftedChunkReuse::TouchKey(
    const BlockHash& key, int32_t num_tokens, const BeforeUnpin& before_unpin) {
  if (num_tokens < 1 || num_tokens > kMaxKeyedChunkTokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse::TouchKey: a chunk has 1 to 2^30 tokens, got ", num_tokens));
  }
  std::optional<ChunkLocation> cached = index_->Find(key, Placeholder(num_tokens));
  if (!cached.has_value() || !index_->Acquire(*cached).ok()) return std::nullopt;
  ++stats_.acquired;
  if (before_unpin) before_unpin(cached->blocks);
  PAGEDKV_RETURN_IF_ERROR(index_->Release(*cached));
  return cached->position;
}

absl::StatusOr<ChunkCopyResult> ShiftedChunkReuse::RegisterKey(const BlockHash& key,
                                                               int32_t num_tokens, int32_t position,
                                                               const BeforeUnpin& before_unpin) {
  if (num_tokens < 1 || num_tokens > kMaxKeyedChunkTokens || position < 0 ||
      position > INT32_MAX - num_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShiftedChunkReuse::RegisterKey: need a chunk of 1 to 2^30 tokens at a "
                     "position >= 0 that ends below 2^31; got ",
                     num_tokens, " tokens at ", position));
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      const ChunkCopyResult result,
      index_->InsertCopy({.key = key, .tokens = Placeholder(num_tokens), .position = position},
                         [&](std::span<const BlockId> blocks) {
                           if (before_unpin) before_unpin(blocks);
                           return absl::OkStatus();
                         }));
  Count(result, num_tokens);
  return result;
}

void ShiftedChunkReuse::Count(ChunkCopyResult result, int64_t num_tokens) {
  switch (result) {
    case ChunkCopyResult::kInserted:
      ++stats_.registered;
      stats_.registered_tokens += num_tokens;
      return;
    case ChunkCopyResult::kAlreadyRegistered:
      ++stats_.already_registered;
      return;
    case ChunkCopyResult::kNoRoom:
      ++stats_.register_failures;  // the chunk is simply not cached
      return;
  }
}

}  // namespace pagedkv
