// Copyright 2026 The pagedkv Authors.
//
// KV cache groups of a model preset: see engine/tools/replay/cache_mode/hybrid_cache_replay.h.
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pagedkv::replay {

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
