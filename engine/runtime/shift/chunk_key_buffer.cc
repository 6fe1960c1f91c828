// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/chunk_key_buffer.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace pagedkv {

void ChunkKeyBuffer::Store(int32_t token, std::span<const float> rotated, int64_t row,
                           int64_t num_rows, const ChunkKeyShape& shape) {
  if (captured_.empty()) {
    shape_ = shape;
    keys_.assign(static_cast<size_t>(int64_t{shape.num_layers} * shape.num_tokens * shape.width),
                 0.0f);
    captured_.assign(static_cast<size_t>(shape.num_tokens), 0);
  }
  const int64_t width = shape_.width;
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    const float* from = rotated.data() + (int64_t{l} * num_rows + row) * width;
    std::copy_n(from, width, keys_.data() + (int64_t{l} * shape_.num_tokens + token) * width);
  }
  char& seen = captured_[static_cast<size_t>(token)];
  if (!seen) ++num_captured_;
  seen = 1;
}

std::vector<std::vector<float>> ChunkKeyBuffer::ByGroup(std::span<const int32_t> layer_group,
                                                        int32_t num_groups) const {
  std::vector<std::vector<float>> groups(static_cast<size_t>(num_groups));
  const int64_t layer_floats = int64_t{shape_.num_tokens} * shape_.width;
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    const size_t g = layer_group.empty() ? 0 : static_cast<size_t>(layer_group[l]);
    const auto begin = keys_.begin() + l * layer_floats;
    groups[g].insert(groups[g].end(), begin, begin + layer_floats);
  }
  return groups;
}

}  // namespace pagedkv
