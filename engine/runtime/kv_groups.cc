// Copyright 2026 The pagedkv Authors.
//
// ChooseKvCacheLayout (see kv_groups.h).
#include "engine/runtime/kv_groups.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pagedkv::engine_internal {

absl::StatusOr<KvCacheLayout> HybridKvCacheLayout(const ModelConfig& c) {
  std::map<int32_t, std::vector<int32_t>> layers_of;  // window (0 = full) -> its layers
  for (int32_t l = 0; l < c.n_layers; ++l) layers_of[c.LayerWindow(l)].push_back(l);
  if (!layers_of.contains(0) || layers_of.size() < 2) {
    return absl::FailedPreconditionError(
        layers_of.contains(0)
            ? "the model has no sliding-window layers"
            : "every layer is windowed, and a KvCacheManager needs a full-attention group");
  }
  int32_t per_group = c.n_layers;
  for (const auto& [w, layers] : layers_of) {
    per_group = std::min(per_group, static_cast<int32_t>(layers.size()));
  }
  KvCacheLayout layout{.hybrid = true, .layers_per_block = per_group};
  layout.layer_group.assign(static_cast<size_t>(c.n_layers), 0);
  std::vector<std::string> kinds;
  for (const auto& [w, layers] : layers_of) {  // window 0 (full) first: group 0 is full
    if (layers.size() % static_cast<size_t>(per_group) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          layers.size(), " layers of window ", w, " do not split into groups of ", per_group,
          " (the smallest kind's layers): groups of unequal size are not supported"));
    }
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % static_cast<size_t>(per_group) == 0) {
        layout.groups.push_back(
            {.kind = w == 0 ? KvCacheGroupKind::kFullAttention : KvCacheGroupKind::kSlidingWindow,
             .sliding_window = w,
             .num_layers = per_group});
      }
      layout.layer_group[static_cast<size_t>(layers[i])] =
          static_cast<int32_t>(layout.groups.size()) - 1;
    }
    kinds.push_back(absl::StrCat(layers.size(), w == 0 ? " full" : absl::StrCat(" window ", w)));
  }
  layout.reason = absl::StrCat(layout.groups.size(), " KV cache groups of ", per_group, " layers (",
                               absl::StrJoin(kinds, ", "), ")");
  return layout;
}

std::string HybridIncompatibleOptions(const EngineOptions& o) {
  // Shifted chunk reuse runs over groups (a copy per group); CacheBlend recomputes over one.
  return o.chunk_reuse.mode != ChunkReuseMode::kOff && o.chunk_reuse.recompute_fraction > 0.0
             ? "chunk_reuse.recompute_fraction"
             : "";
}

absl::StatusOr<KvCacheLayout> ChooseKvCacheLayout(const EngineOptions& options,
                                                  const ModelConfig& config) {
  KvCacheLayout plain{.layers_per_block = config.n_layers};
  if (options.hybrid_kv_cache == HybridKvCacheMode::kOff) {
    plain.reason = "hybrid_kv_cache off";
    return plain;
  }
  const bool on = options.hybrid_kv_cache == HybridKvCacheMode::kOn;
  absl::StatusOr<KvCacheLayout> hybrid = HybridKvCacheLayout(config);
  if (!hybrid.ok()) {
    if (on) {
      return absl::InvalidArgumentError(
          absl::StrCat("EngineOptions.hybrid_kv_cache is on but ", hybrid.status().message(),
                       "; use kAuto or kOff (--hybrid-kv-cache auto or off)"));
    }
    plain.reason = absl::StrCat("auto: ", hybrid.status().message());
    return plain;
  }
  const std::string incompatible = HybridIncompatibleOptions(options);
  if (!incompatible.empty()) {
    if (on) {
      return absl::InvalidArgumentError(
          absl::StrCat("EngineOptions.hybrid_kv_cache is on, but ", incompatible,
                       " need one KV cache group; turn them off or use hybrid_kv_cache kAuto "
                       "(falls back to all-full) or kOff (--hybrid-kv-cache auto or off)"));
    }
    plain.reason = absl::StrCat("auto: ", incompatible, " need a plain KvCacheManager");
    return plain;
  }
  hybrid->reason = absl::StrCat(on ? "on: " : "auto: ", hybrid->reason);
  return hybrid;
}

}  // namespace pagedkv::engine_internal
