// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/simulated_chunk_reuse.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {

absl::StatusOr<std::unique_ptr<SimulatedChunkReuse>> SimulatedChunkReuse::Create(
    std::unique_ptr<ChunkIndex> index, const SimulatedChunkReuseOptions& options) {
  if (index == nullptr) {
    return absl::InvalidArgumentError("SimulatedChunkReuse::Create: the index is null");
  }
  if (options.first_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SimulatedChunkReuse: first_k (tokens recomputed per chunk) must be >= 0, got ",
        options.first_k));
  }
  return std::unique_ptr<SimulatedChunkReuse>(new SimulatedChunkReuse(options, std::move(index)));
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
  // The index takes the blocks from the pool; there is no KV to write into them.
  PAGEDKV_ASSIGN_OR_RETURN(
      const ChunkCopyResult result,
      index_->InsertCopy(
          {.key = KeyOf(tokens, cache_salt, adapter_id), .tokens = tokens, .position = position},
          [](std::span<const BlockId>) { return absl::OkStatus(); }));
  switch (result) {
    case ChunkCopyResult::kInserted:
      ++stats_.registered;
      stats_.registered_tokens += static_cast<int64_t>(tokens.size());
      return true;
    case ChunkCopyResult::kAlreadyRegistered:
      ++stats_.already_registered;
      return false;
    case ChunkCopyResult::kNoRoom:
      ++stats_.register_failures;  // the chunk is simply not cached (as in the engine)
      return false;
  }
  return false;
}

}  // namespace pagedkv::replay
