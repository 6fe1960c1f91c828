// Copyright 2026 The pagedkv Authors.
//
// Host construction of the RoPE cos/sin table.
#include "pagedkv/kernels/rope_table.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::StatusOr<RopeTable> RopeTable::Create(const RopeConfig& config, int64_t num_positions) {
  PAGEDKV_RETURN_IF_ERROR(config.Validate());
  constexpr int64_t kMaxTableEntries = int64_t{1} << 30;
  const int32_t num_pairs = config.RotaryDim() / 2;
  if (num_positions < 1 || num_positions * num_pairs > kMaxTableEntries) {
    return absl::InvalidArgumentError(absl::StrCat("RopeTable num_positions = ", num_positions,
                                                   " must be in [1, ", kMaxTableEntries / num_pairs,
                                                   "] for rotary_dim ", config.RotaryDim()));
  }
  RopeTable table;
  table.config_ = config;
  table.num_positions_ = num_positions;
  table.attention_factor_ = static_cast<float>(RopeAttentionFactor(config));
  table.inv_freq_.resize(num_pairs);
  for (int32_t i = 0; i < num_pairs; ++i) table.inv_freq_[i] = RopeInvFreq(config, i);
  table.cos_sin_.resize(static_cast<size_t>(num_positions) * num_pairs * 2);
  float* entry = table.cos_sin_.data();
  for (int64_t pos = 0; pos < num_positions; ++pos) {
    for (int32_t i = 0; i < num_pairs; ++i, entry += 2) {
      RopeCosSin(pos, table.inv_freq_[i], &entry[0], &entry[1]);
    }
  }
  return table;
}

RopeTableView RopeTable::View() const {
  RopeTableView view;
  view.cos_sin = cos_sin_.data();
  view.inv_freq = inv_freq_.data();
  view.num_positions = num_positions_;
  view.head_dim = config_.head_dim;
  view.rotary_dim = config_.RotaryDim();
  view.layout = config_.layout;
  view.attention_factor = attention_factor_;
  return view;
}

}  // namespace pagedkv
