// Copyright 2026 The pagedkv Authors.
#include "engine/replay/simulated_chunk_reuse.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {

absl::StatusOr<std::unique_ptr<SimulatedChunkReuse>> SimulatedChunkReuse::Create(
    BlockPool* pool, const SimulatedChunkReuseOptions& options) {
  if (pool == nullptr) {
    return absl::InvalidArgumentError("SimulatedChunkReuse::Create: the pool is null");
  }
  if (options.first_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SimulatedChunkReuse: first_k (tokens recomputed per chunk) must be >= 0, got ",
        options.first_k));
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index, ChunkIndex::Create(pool));
  return std::unique_ptr<SimulatedChunkReuse>(
      new SimulatedChunkReuse(pool, options, std::move(index)));
}

SimulatedChunkReuse::~SimulatedChunkReuse() = default;

BlockHash SimulatedChunkReuse::KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                                     uint64_t adapter_id) const {
  // The simulated model has no RoPE configuration of its own: the model fingerprint names it.
  return ChunkKey(tokens, {.cache_salt = cache_salt,
                           .adapter_id = adapter_id,
                           .rope_fingerprint = "replay",
                           .model_fingerprint = options_.model_fingerprint});
}

std::optional<AcquiredChunk> SimulatedChunkReuse::Acquire(std::span<const TokenId> tokens,
                                                          std::string_view cache_salt,
                                                          uint64_t adapter_id) {
  std::optional<AcquiredChunk> chunk = pins_.Acquire(KeyOf(tokens, cache_salt, adapter_id), tokens);
  if (chunk.has_value()) ++stats_.acquired;
  return chunk;
}

void SimulatedChunkReuse::Release(int64_t handle) {
  if (pins_.Release(handle)) ++stats_.released_unused;
}

absl::Status SimulatedChunkReuse::ReleaseAcquired() { return pins_.ReleaseAll(); }

absl::StatusOr<bool> SimulatedChunkReuse::Register(std::span<const TokenId> tokens,
                                                   std::string_view cache_salt, uint64_t adapter_id,
                                                   int32_t position) {
  if (tokens.empty() || position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SimulatedChunkReuse::Register: need a non-empty chunk at a position >= 0 "
                     "(got ",
                     tokens.size(), " tokens at ", position, ")"));
  }
  const BlockHash key = KeyOf(tokens, cache_salt, adapter_id);
  if (index_->Contains(key)) {
    ++stats_.already_registered;
    return false;
  }
  const int32_t bs = pool_->block_size();
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t num_blocks = NumBlocksFor(n, bs);
  std::vector<BlockId> blocks;
  if (num_blocks > pool_->NumAvailableBlocks() ||
      !pool_->Allocate(static_cast<int32_t>(num_blocks), &blocks).ok()) {
    ++stats_.register_failures;  // no room: the chunk is simply not cached (as in the engine)
    return false;
  }
  absl::StatusOr<bool> inserted = index_->Insert(
      {.key = key, .tokens = tokens, .position = position, .blocks = blocks, .start_offset = 0});
  const std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  absl::Status status = inserted.status();
  status.Update(pool_->Unpin(tail_first));
  PAGEDKV_RETURN_IF_ERROR(status);
  if (*inserted) {
    ++stats_.registered;
    stats_.registered_tokens += n;
  }
  return *inserted;
}

}  // namespace pagedkv::replay
