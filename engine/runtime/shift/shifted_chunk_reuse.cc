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

// InvalidArgument when options.groups are not a KvCacheManager's groups (group 0 full
// attention), or blending is asked for over several of them.
absl::Status ValidateGroups(const ShiftedChunkReuseOptions& options) {
  if (options.groups.empty()) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(CheckKvCacheGroups(options.groups));
  if (options.groups[0].kind != KvCacheGroupKind::kFullAttention) {
    return absl::InvalidArgumentError(
        "ShiftedChunkReuse: groups[0] must be full attention (a KvCacheManager's group 0 is)");
  }
  if (options.groups.size() > 1 && options.recompute_fraction > 0.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse: recompute_fraction > 0 (CacheBlend) recomputes over one KV cache "
        "group; with ",
        options.groups.size(), " groups set it to 0"));
  }
  return absl::OkStatus();
}

// The more telling of two groups' InsertCopy results for the whole chunk: a copy made, else no
// room, else already registered.
ChunkCopyResult Combine(ChunkCopyResult a, ChunkCopyResult b) {
  const auto rank = [](ChunkCopyResult r) {
    return r == ChunkCopyResult::kInserted ? 2 : r == ChunkCopyResult::kNoRoom ? 1 : 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

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
  if (options.float_keys_bytes < 0 || (options.float_keys_bytes > 0 && !has_mover)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse: float_keys_bytes must be >= 0 (0: off) and needs a ChunkKvMover "
        "(without one there are no keys to keep), got ",
        options.float_keys_bytes));
  }
  if (options.deviation_layer < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse: deviation_layer must be >= 0, got ", options.deviation_layer));
  }
  return ValidateGroups(options);
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
      pins_(index_.get()),
      float_keys_(options.float_keys_bytes > 0
                      ? std::make_unique<ChunkFloatKeys>(options.float_keys_bytes)
                      : nullptr) {
  if (float_keys_ != nullptr) {  // a copy's float keys go with its KV
    index_->SetDropListener([keys = float_keys_.get()](const BlockHash& key) { keys->Erase(key); });
  }
}

ShiftedChunkReuse::~ShiftedChunkReuse() { index_->SetDropListener({}); }

BlockHash ShiftedChunkReuse::KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                                   uint64_t adapter_id) const {
  return ChunkKey(tokens, {.cache_salt = cache_salt,
                           .adapter_id = adapter_id,
                           .rope_fingerprint = rope_fingerprint_,
                           .model_fingerprint = options_.model_fingerprint});
}

BlockHash ShiftedChunkReuse::GroupKey(const BlockHash& key, int32_t g) const {
  return g == 0 ? key : FoldGroupHash(key, g);
}

int32_t ShiftedChunkReuse::FirstKeptToken(int32_t g, int32_t num_tokens) const {
  if (options_.groups.empty()) return 0;
  const KvCacheGroupSpec& group = options_.groups[static_cast<size_t>(g)];
  if (group.kind != KvCacheGroupKind::kSlidingWindow) return 0;
  return std::max(0, num_tokens - group.sliding_window);
}

std::optional<AcquiredChunk> ShiftedChunkReuse::Acquire(std::span<const TokenId> tokens,
                                                        std::string_view cache_salt,
                                                        uint64_t adapter_id) {
  const BlockHash key = KeyOf(tokens, cache_salt, adapter_id);
  const auto length = static_cast<int32_t>(tokens.size());
  std::vector<ChunkPart> parts;
  parts.reserve(static_cast<size_t>(num_groups()));
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t first = FirstKeptToken(g, length);
    parts.push_back({.key = GroupKey(key, g),
                     .tokens = tokens.subspan(static_cast<size_t>(first)),
                     .first_token = first});
  }
  std::optional<AcquiredChunk> chunk = pins_.Acquire(parts, length);
  if (!chunk.has_value()) return chunk;
  ++stats_.acquired;
  if (float_keys_ != nullptr) AddFloatKeySources(key, length, *chunk);
  return chunk;
}

void ShiftedChunkReuse::Release(int64_t handle) {
  float_key_sources_.Remove(handle);
  if (pins_.Release(handle)) ++stats_.released_unused;
}

absl::Status ShiftedChunkReuse::RunMoves(std::span<const KvSlotMove> moves,
                                         std::span<const std::vector<KvSlotMove>> group_moves) {
  absl::Status status;
  if (group_moves.size() > static_cast<size_t>(num_groups() - 1)) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse::RunMoves: ", group_moves.size(), " lists of group slot moves for ",
        num_groups(), " KV cache groups (at most one per group past the first)"));
  } else if (mover_ != nullptr) {
    if (!moves.empty()) status = MoveGroup(0, moves);
    for (size_t g = 0; g < group_moves.size() && status.ok(); ++g) {
      if (group_moves[g].empty()) continue;
      status = MoveGroup(static_cast<int32_t>(g + 1), group_moves[g]);
    }
  }
  float_key_sources_.Clear();
  status.Update(pins_.ReleaseAll());
  return status;
}

absl::Status ShiftedChunkReuse::ValidateRegister(
    std::span<const TokenId> tokens, int32_t position, std::span<const int64_t> slots,
    std::span<const std::vector<int64_t>> group_slots) const {
  const bool slots_fit = slots.size() == tokens.size() || (mover_ == nullptr && slots.empty());
  if (tokens.empty() || position < 0 || !slots_fit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse::Register: need a non-empty chunk at a position >= 0 with one slot "
        "per token (none without a mover); got ",
        tokens.size(), " tokens at ", position, " with ", slots.size(), " slots"));
  }
  const auto extra = static_cast<size_t>(num_groups() - 1);
  if (group_slots.size() != extra && !(mover_ == nullptr && group_slots.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse::Register: need one slot list per KV cache group past the first (",
        extra, "; none without a mover), got ", group_slots.size()));
  }
  for (size_t g = 0; g < group_slots.size(); ++g) {
    const std::vector<int64_t>& s = group_slots[g];
    const auto first = static_cast<size_t>(
        FirstKeptToken(static_cast<int32_t>(g + 1), static_cast<int32_t>(tokens.size())));
    if (s.size() != tokens.size() || std::any_of(s.begin() + static_cast<int64_t>(first), s.end(),
                                                 [](int64_t slot) { return slot < 0; })) {
      return absl::InvalidArgumentError(absl::StrCat("ShiftedChunkReuse::Register: group ", g + 1,
                                                     " needs one slot per token (", tokens.size(),
                                                     "), valid (>= 0) from chunk token ", first,
                                                     " on; got ", s.size(), " slots"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ShiftedChunkReuse::Register(std::span<const TokenId> tokens,
                                                 std::string_view cache_salt, uint64_t adapter_id,
                                                 int32_t position, std::span<const int64_t> slots,
                                                 std::span<const std::vector<int64_t>> group_slots,
                                                 const ChunkFloatKeysInput& float_keys) {
  PAGEDKV_RETURN_IF_ERROR(ValidateRegister(tokens, position, slots, group_slots));
  const auto length = static_cast<int32_t>(tokens.size());
  PAGEDKV_RETURN_IF_ERROR(ValidateFloatKeys(length, float_keys));
  const BlockHash key = KeyOf(tokens, cache_salt, adapter_id);
  ChunkCopyResult result = ChunkCopyResult::kAlreadyRegistered;
  std::vector<int32_t> inserted;
  for (int32_t g = 0; g < num_groups(); ++g) {
    std::span<const int64_t> from = slots;
    if (g > 0 && !group_slots.empty()) from = group_slots[static_cast<size_t>(g - 1)];
    absl::StatusOr<ChunkCopyResult> r = RegisterGroup(g, key, tokens, position, from);
    if (!r.ok()) {
      absl::Status status = r.status();
      status.Update(ForgetGroups(key, inserted));
      return status;
    }
    if (*r == ChunkCopyResult::kInserted) {
      inserted.push_back(g);
      KeepFloatKeys(g, key, position, length, float_keys);
    }
    result = g == 0 ? *r : Combine(result, *r);
  }
  Count(result, length);
  return result == ChunkCopyResult::kInserted;
}

absl::StatusOr<ChunkCopyResult> ShiftedChunkReuse::RegisterGroup(int32_t g, const BlockHash& key,
                                                                 std::span<const TokenId> tokens,
                                                                 int32_t position,
                                                                 std::span<const int64_t> slots) {
  const auto first = static_cast<size_t>(FirstKeptToken(g, static_cast<int32_t>(tokens.size())));
  const int32_t kept_position = position + static_cast<int32_t>(first);
  const std::span<const int64_t> kept_slots = slots.empty() ? slots : slots.subspan(first);
  return index_->InsertCopy(
      {.key = GroupKey(key, g), .tokens = tokens.subspan(first), .position = kept_position},
      [&](std::span<const BlockId> blocks) {
        return CopyInto(g, blocks, kept_slots, kept_position);
      });
}

absl::Status ShiftedChunkReuse::ForgetGroups(const BlockHash& key,
                                             std::span<const int32_t> groups) {
  absl::Status status;
  for (const int32_t g : groups) status.Update(index_->Erase(GroupKey(key, g)));
  return status;
}

absl::Status ShiftedChunkReuse::CopyInto(int32_t g, std::span<const BlockId> blocks,
                                         std::span<const int64_t> slots, int32_t position) const {
  if (mover_ == nullptr || slots.empty()) return absl::OkStatus();  // no KV to write
  const int32_t bs = index_->pool().block_size();
  std::vector<int64_t> dst;
  dst.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto token = static_cast<int32_t>(i);
    dst.push_back(int64_t{blocks[static_cast<size_t>(token / bs)]} * bs + token % bs);
  }
  return mover_->CopySlots(g, slots, dst, position);
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
  std::vector<ChunkLocation> cached;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t kept = num_tokens - FirstKeptToken(g, num_tokens);
    std::optional<ChunkLocation> found = index_->Find(GroupKey(key, g), Placeholder(kept));
    if (!found.has_value()) return std::nullopt;
    cached.push_back(*std::move(found));
  }
  for (size_t g = 0; g < cached.size(); ++g) {
    if (index_->Acquire(cached[g]).ok()) continue;
    for (size_t h = g; h-- > 0;) PAGEDKV_RETURN_IF_ERROR(index_->Release(cached[h]));
    return std::nullopt;
  }
  ++stats_.acquired;
  if (before_unpin) {
    for (const ChunkLocation& location : cached) before_unpin(location.blocks);
  }
  for (size_t g = cached.size(); g-- > 0;) PAGEDKV_RETURN_IF_ERROR(index_->Release(cached[g]));
  return cached[0].position;
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
  ChunkCopyResult result = ChunkCopyResult::kAlreadyRegistered;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t first = FirstKeptToken(g, num_tokens);
    PAGEDKV_ASSIGN_OR_RETURN(const ChunkCopyResult r,
                             index_->InsertCopy({.key = GroupKey(key, g),
                                                 .tokens = Placeholder(num_tokens - first),
                                                 .position = position + first},
                                                [&](std::span<const BlockId> blocks) {
                                                  if (before_unpin) before_unpin(blocks);
                                                  return absl::OkStatus();
                                                }));
    // A copy without KV of its own: no float keys of an earlier copy may move it.
    if (r == ChunkCopyResult::kInserted && float_keys_ != nullptr) {
      float_keys_->Erase(GroupKey(key, g));
    }
    result = g == 0 ? r : Combine(result, r);
  }
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
