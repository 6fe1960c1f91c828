// Copyright 2026 The pagedkv Authors.
//
// Hybrid cache-mode replay: see engine/tools/replay/cache_mode/hybrid_cache_replay.h.
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/tools/replay/cache_mode/chunk_replay.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::replay {
namespace {

double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

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

// Per-request KV held, accumulated.
struct Held {
  double prefill_sum = 0;
  double decode_sum = 0;
  int64_t admitted = 0;
};

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
                   HybridReplayResult& result) {
  const int64_t past_device = hit_tokens / block_size - loaded.device_blocks;
  const int64_t host = std::clamp<int64_t>(past_device, 0, loaded.host_blocks);
  const int64_t remote = std::clamp<int64_t>(past_device - host, 0, loaded.remote_blocks);
  result.host_hit_tokens += host * block_size;
  result.remote_hit_tokens += remote * block_size;
}

// What a request is replayed with besides the manager: the tiers and the chunk reuse (null when
// off), and the request's marked chunks.
struct ReplayAids {
  ServeTiers* tiers = nullptr;
  ChunkReplay* chunks = nullptr;
  std::span<const TrackedChunk> request_chunks = {};
};

// Admits (through the tiers when set), counts the marked chunks of, decodes and frees request r.
// Returns false when the pool refused it; an error only from the tier walk's or the chunk
// reuse's bookkeeping.
absl::StatusOr<bool> ReplayOne(KvCacheManager& m, const ReplayAids& aids,
                               const std::vector<TokenId>& prompt, RequestId id,
                               int64_t decode_tokens, Held& held, HybridReplayResult& result) {
  absl::StatusOr<CacheRequest> req = m.NewRequest(id, prompt);
  if (!req.ok()) return false;
  ServeTiers* tiers = aids.tiers;
  TierHits loaded;
  if (tiers != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(loaded, tiers->Onboard(*req));
  }
  const std::optional<int64_t> hit_tokens = AdmitPrompt(m, *req);
  if (tiers != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(tiers->ReleasePins());
    PAGEDKV_RETURN_IF_ERROR(tiers->FlushWriteThrough());  // the prompt is computed
  }
  if (!hit_tokens.has_value()) return false;
  CountTierHits(loaded, *hit_tokens, m.block_size(), result);
  if (aids.chunks != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(aids.chunks->CountRequest(aids.request_chunks, *hit_tokens,
                                                      m.block_size(), result.shifted));
  }
  const int64_t prefill = m.NumHeldLayerBlocks(id).value_or(0);
  for (int64_t s = 0; s < decode_tokens; ++s) {
    if (!req->AppendToken(MixToken(id, static_cast<uint64_t>(s))).ok() ||
        !m.AllocateSlots(*req, 1).ok())
      break;
  }
  const int64_t decode = m.NumHeldLayerBlocks(id).value_or(0);
  held.prefill_sum += static_cast<double>(prefill);
  held.decode_sum += static_cast<double>(decode);
  ++held.admitted;
  result.peak_prefill_layer_blocks = std::max(result.peak_prefill_layer_blocks, prefill);
  result.peak_decode_layer_blocks = std::max(result.peak_decode_layer_blocks, decode);
  return m.Free(id).ok();
}

// The chunk reuse of marked chunks over `m`'s chunk index, or null when not counted.
absl::StatusOr<std::unique_ptr<ChunkReplay>> MakeChunkReplay(KvCacheManager& m,
                                                             const ExpandedWorkload& expanded,
                                                             const HybridReplayOptions& options) {
  if (!options.count_shifted || !expanded.has_chunks()) return nullptr;
  // Hash-level replay has no tokens to compare: keys alone identify chunks.
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index,
                           m.AttachChunkIndex({.verify_tokens = false}));
  return ChunkReplay::Create(std::move(index), /*belady=*/nullptr, options.groups);
}

}  // namespace

std::vector<KvCacheGroupSpec> AllFullGroupsFor(const ModelPreset& model) {
  return {{.kind = KvCacheGroupKind::kFullAttention, .num_layers = model.num_layers}};
}

std::vector<KvCacheGroupSpec> HybridGroupsFor(const ModelPreset& model) {
  if (model.layer_windows.empty()) return AllFullGroupsFor(model);
  std::map<int32_t, int32_t> layers_of;  // window (0 = full) -> layers
  for (const int32_t w : model.layer_windows) ++layers_of[w];
  int32_t per_group = model.num_layers;
  for (const auto& [w, n] : layers_of) per_group = std::min(per_group, n);
  std::vector<KvCacheGroupSpec> groups;
  for (const auto& [w, n] : layers_of) {  // window 0 (full) first: group 0 is full attention
    for (int32_t left = n; left > 0; left -= per_group) {
      groups.push_back(
          {.kind = w == 0 ? KvCacheGroupKind::kFullAttention : KvCacheGroupKind::kSlidingWindow,
           .sliding_window = w,
           .num_layers = std::min(left, per_group)});
    }
  }
  return groups;
}

int32_t LayersPerPage(const std::vector<KvCacheGroupSpec>& groups) {
  int32_t n = 0;
  for (const KvCacheGroupSpec& g : groups) n = std::max(n, g.num_layers);
  return n;
}

absl::StatusOr<HybridReplayResult> RunHybridCacheReplay(const ExpandedWorkload& expanded,
                                                        const HybridReplayOptions& options) {
  if (options.capacity_blocks <= 0 || options.capacity_blocks >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "hybrid replay: capacity must be in [1, 2^31) blocks, got %d", options.capacity_blocks));
  }
  if (options.decode_tokens < 0) {
    return absl::InvalidArgumentError("hybrid replay: decode_tokens must be >= 0");
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<KvCacheManager> m,
      KvCacheManager::Create({.num_blocks = static_cast<int32_t>(options.capacity_blocks),
                              .block_size = options.block_size,
                              .eviction_policy = options.policy,
                              .groups = options.groups}));
  std::unique_ptr<ServeTiers> tiers;
  if (options.tiers.enabled()) {
    PAGEDKV_ASSIGN_OR_RETURN(tiers, ServeTiers::Create(options.tiers, m.get(), /*block_bytes=*/0));
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkReplay> chunks,
                           MakeChunkReplay(*m, expanded, options));
  HybridReplayResult result;
  result.shifted.shifted_counted = chunks != nullptr;
  Held held;
  const double start = CpuSeconds();
  for (size_t r = 0; r < expanded.num_requests(); ++r) {
    const std::vector<TokenId> prompt = RequestTokens(expanded, r, options.block_size);
    ++result.requests;
    const int64_t decode =
        r < options.output_tokens.size() ? options.output_tokens[r] : options.decode_tokens;
    ReplayAids aids{.tiers = tiers.get(), .chunks = chunks.get()};
    if (chunks != nullptr) {
      const auto first = static_cast<size_t>(expanded.chunk_begin[r]);
      aids.request_chunks =
          std::span(expanded.chunks)
              .subspan(first, static_cast<size_t>(expanded.chunk_begin[r + 1]) - first);
    }
    PAGEDKV_ASSIGN_OR_RETURN(const bool admitted,
                             ReplayOne(*m, aids, prompt, r + 1, decode, held, result));
    if (!admitted) ++result.refused;
  }
  result.seconds = CpuSeconds() - start;
  const CacheStats stats = m->stats();
  result.queried_tokens = stats.queried_tokens;
  result.hit_tokens = stats.hit_tokens;
  result.evictions = stats.evictions;
  if (held.admitted > 0) {
    result.mean_prefill_layer_blocks = held.prefill_sum / static_cast<double>(held.admitted);
    result.mean_decode_layer_blocks = held.decode_sum / static_cast<double>(held.admitted);
  }
  return result;
}

std::string KvCacheGroupsText(const std::vector<KvCacheGroupSpec>& groups) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < groups.size();) {
    size_t j = i;
    int32_t layers = 0;
    for (; j < groups.size() && groups[j].kind == groups[i].kind &&
           groups[j].sliding_window == groups[i].sliding_window;
         ++j) {
      layers += groups[j].num_layers;
    }
    std::string part = groups[i].kind == KvCacheGroupKind::kFullAttention
                           ? absl::StrFormat("full x%d", layers)
                           : absl::StrFormat("window %d x%d", groups[i].sliding_window, layers);
    if (j - i > 1) absl::StrAppendFormat(&part, " in %d groups", j - i);
    parts.push_back(part);
    i = j;
  }
  return absl::StrJoin(parts, " | ");
}

}  // namespace pagedkv::replay
