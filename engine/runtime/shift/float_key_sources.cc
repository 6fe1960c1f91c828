// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/float_key_sources.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace pagedkv {

void FloatKeySources::Add(int64_t handle, int32_t group, std::shared_ptr<const ChunkKeys> keys,
                          std::span<const int64_t> slots) {
  if (by_group_.size() <= static_cast<size_t>(group)) {
    by_group_.resize(static_cast<size_t>(group) + 1);
  }
  Held& held = held_[handle];
  auto& sources = by_group_[static_cast<size_t>(group)];
  for (size_t j = 0; j < slots.size(); ++j) {
    Source& source = sources[slots[j]];
    source.keys = keys.get();
    source.token = static_cast<int32_t>(j);
    ++source.handles;
    held.slots.emplace_back(group, slots[j]);
  }
  held.keys.push_back(std::move(keys));
}

void FloatKeySources::Remove(int64_t handle) {
  const auto it = held_.find(handle);
  if (it == held_.end()) return;
  for (const auto& [group, slot] : it->second.slots) {
    auto& sources = by_group_[static_cast<size_t>(group)];
    const auto source = sources.find(slot);
    if (--source->second.handles == 0) sources.erase(source);
  }
  held_.erase(it);
}

void FloatKeySources::Clear() {
  by_group_.clear();
  held_.clear();
}

FloatKeySources::Split FloatKeySources::SplitMoves(int32_t group,
                                                   std::span<const KvSlotMove> moves) const {
  Split split;
  std::vector<Source> found;
  const bool any = static_cast<size_t>(group) < by_group_.size();
  for (const KvSlotMove& m : moves) {
    const Source* source = nullptr;
    if (any) {
      const auto& sources = by_group_[static_cast<size_t>(group)];
      const auto it = sources.find(m.src_slot);
      if (it != sources.end()) source = &it->second;
    }
    // The key must be the one the slot holds (computed at the move's old position), of the
    // group's layers and width.
    const bool fits = source != nullptr &&
                      (found.empty() || (source->keys->width == found[0].keys->width &&
                                         source->keys->num_layers == found[0].keys->num_layers));
    if (!fits || source->keys->position + source->token != m.old_position) {
      split.plain.push_back(m);
      continue;
    }
    split.from_keys.push_back(m);
    found.push_back(*source);
  }
  if (found.empty()) return split;
  const int32_t layers = found[0].keys->num_layers;
  const int64_t width = found[0].keys->width;
  split.keys.resize(static_cast<size_t>(layers) * found.size() * static_cast<size_t>(width));
  float* out = split.keys.data();
  for (int32_t l = 0; l < layers; ++l) {
    for (const Source& s : found) {
      out = std::copy_n(s.keys->Key(l, s.token), width, out);
    }
  }
  return split;
}

}  // namespace pagedkv
