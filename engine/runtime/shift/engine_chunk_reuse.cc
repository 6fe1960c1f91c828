// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/engine_chunk_reuse.h"

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
#include "engine/runtime/shift/rerotate_slots.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

absl::StatusOr<std::unique_ptr<EngineChunkReuse>> EngineChunkReuse::Create(
    ModelRunner* runner, std::unique_ptr<ChunkIndex> index,
    const EngineChunkReuseOptions& options) {
  if (runner == nullptr || index == nullptr) {
    return absl::InvalidArgumentError("EngineChunkReuse::Create: runner and index are required");
  }
  if (options.first_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineChunkReuse: first_k (tokens recomputed per chunk) must be >= 0, got ",
                     options.first_k));
  }
  if (!(options.recompute_fraction >= 0.0 && options.recompute_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineChunkReuse: recompute_fraction must be in [0, 1], got ",
                     options.recompute_fraction));
  }
  const int32_t num_layers = runner->config().n_layers;
  if (options.deviation_layer < 0 ||
      (options.recompute_fraction > 0.0 && options.deviation_layer >= num_layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineChunkReuse: deviation_layer must be in [0, ", num_layers,
                     ") (the model's layers), got ", options.deviation_layer));
  }
  const BlockPool& pool = index->pool();
  if (pool.num_blocks() != runner->options().num_blocks ||
      pool.block_size() != runner->options().block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineChunkReuse::Create: the pool has ", pool.num_blocks(), " blocks of ",
                     pool.block_size(), " tokens but the model runner's KV pages have ",
                     runner->options().num_blocks, " blocks of ", runner->options().block_size));
  }
  return std::unique_ptr<EngineChunkReuse>(new EngineChunkReuse(runner, options, std::move(index)));
}

EngineChunkReuse::EngineChunkReuse(ModelRunner* runner, const EngineChunkReuseOptions& options,
                                   std::unique_ptr<ChunkIndex> index)
    : runner_(runner),
      options_(options),
      rope_fingerprint_(runner->rope_config().Fingerprint()),
      index_(std::move(index)) {}

EngineChunkReuse::~EngineChunkReuse() = default;

BlockHash EngineChunkReuse::KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                                  uint64_t adapter_id) const {
  return ChunkKey(tokens, {.cache_salt = cache_salt,
                           .adapter_id = adapter_id,
                           .rope_fingerprint = rope_fingerprint_,
                           .model_fingerprint = options_.model_fingerprint});
}

std::optional<AcquiredChunk> EngineChunkReuse::Acquire(std::span<const TokenId> tokens,
                                                       std::string_view cache_salt,
                                                       uint64_t adapter_id) {
  return pins_.Acquire(KeyOf(tokens, cache_salt, adapter_id), tokens);
}

void EngineChunkReuse::Release(int64_t handle) { pins_.Release(handle); }

std::optional<CacheBlendHook> EngineChunkReuse::MakeBlendHook(const ScheduledBatch& batch) const {
  std::vector<BlendGroup> groups;
  for (const ScheduledSequence& s : batch.sequences) {
    if (s.num_blend_tokens <= 0) continue;
    groups.push_back(
        BlendGroup{.first_row = s.query_start,
                   .num_rows = s.num_blend_tokens,
                   .num_keep = NumToRecompute(options_.recompute_fraction, s.num_blend_tokens)});
  }
  if (groups.empty()) return std::nullopt;
  return CacheBlendHook(groups, options_.deviation_layer);
}

absl::Status EngineChunkReuse::RunMoves(std::span<const KvSlotMove> moves) {
  absl::Status status;
  if (!moves.empty()) {
    std::vector<int64_t> src, dst;
    std::vector<int32_t> old_pos, new_pos;
    src.reserve(moves.size());
    dst.reserve(moves.size());
    old_pos.reserve(moves.size());
    new_pos.reserve(moves.size());
    for (const KvSlotMove& m : moves) {
      src.push_back(m.src_slot);
      dst.push_back(m.dst_slot);
      old_pos.push_back(m.old_position);
      new_pos.push_back(m.new_position);
    }
    status = ReRotateSlots(
        *runner_, {.src = src, .dst = dst, .old_positions = old_pos, .new_positions = new_pos});
  }
  status.Update(pins_.ReleaseAll());
  return status;
}

absl::Status EngineChunkReuse::Register(std::span<const TokenId> tokens,
                                        std::string_view cache_salt, uint64_t adapter_id,
                                        int32_t position, std::span<const int64_t> slots) {
  if (tokens.empty() || slots.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("EngineChunkReuse::Register: ", tokens.size(),
                                                   " tokens but ", slots.size(),
                                                   " slots (need equal, non-zero counts)"));
  }
  const int32_t bs = index_->pool().block_size();
  const auto n = static_cast<int32_t>(tokens.size());
  // The index takes the blocks (nothing is cached when the pool has no room, or the chunk is
  // cached already); the copy re-rotates from and to the same positions, i.e. copies K and V.
  const auto copy = [&](std::span<const BlockId> blocks) {
    std::vector<int64_t> dst;
    std::vector<int32_t> pos;
    dst.reserve(tokens.size());
    pos.reserve(tokens.size());
    for (int32_t i = 0; i < n; ++i) {
      dst.push_back(int64_t{blocks[static_cast<size_t>(i / bs)]} * bs + i % bs);
      pos.push_back(position + i);
    }
    return ReRotateSlots(*runner_,
                         {.src = slots, .dst = dst, .old_positions = pos, .new_positions = pos});
  };
  return index_
      ->InsertCopy(
          {.key = KeyOf(tokens, cache_salt, adapter_id), .tokens = tokens, .position = position},
          copy)
      .status();
}

}  // namespace pagedkv
