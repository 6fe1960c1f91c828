// Copyright 2026 The pagedkv Authors.
//
// ModelRunner KV cache groups (hybrid KV cache, issue #31): the layer -> group / page array map
// from ModelRunnerOptions::layer_kv_group, the group_* inputs' checks and upload, and each
// layer's slots and block tables.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/model_runner.h"
#include "engine/model/runner/runner_buffers.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

using runner_internal::CopySpan;
using runner_internal::Grow;

absl::Status ModelRunner::InitKvGroups() {
  const ModelConfig& c = weights_->config();
  const std::vector<int32_t>& groups = options_.layer_kv_group;
  layer_page_.assign(static_cast<size_t>(c.n_layers), 0);
  if (groups.empty()) {
    for (int32_t l = 0; l < c.n_layers; ++l) layer_page_[static_cast<size_t>(l)] = l;
    num_kv_groups_ = 1;
    group_window_ = {0};
    return absl::OkStatus();
  }
  if (static_cast<int64_t>(groups.size()) != c.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("ModelRunnerOptions.layer_kv_group has ",
                                                   groups.size(), " entries; give one per layer (",
                                                   c.n_layers, ") or none"));
  }
  num_kv_groups_ = *std::max_element(groups.begin(), groups.end()) + 1;
  std::vector<int32_t> size(static_cast<size_t>(std::max(num_kv_groups_, 1)), 0);
  group_window_.assign(size.size(), INT32_MAX);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const int32_t g = groups[static_cast<size_t>(l)];
    if (g < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelRunnerOptions.layer_kv_group[", l, "] = ", g, " must be >= 0"));
    }
    layer_page_[static_cast<size_t>(l)] = size[static_cast<size_t>(g)]++;
    int32_t& w = group_window_[static_cast<size_t>(g)];
    const int32_t window = c.LayerWindow(l);
    w = (window == 0 || w == 0) ? 0 : std::min(w, window);
  }
  for (size_t g = 0; g < size.size(); ++g) {
    if (size[g] == 0) {
      return absl::InvalidArgumentError(absl::StrCat("ModelRunnerOptions.layer_kv_group: group ", g,
                                                     " has no layer; number groups 0..G-1"));
    }
  }
  return absl::OkStatus();
}

ModelRunner::StepRows ModelRunner::ForLayer(const StepRows& rows, int32_t layer) const {
  const int32_t g =
      options_.layer_kv_group.empty() ? 0 : options_.layer_kv_group[static_cast<size_t>(layer)];
  if (g == 0) return rows;
  StepRows out = rows;
  out.slots = rows.group_slots + (g - 1) * rows.group_slot_stride;
  out.block_tables = rows.group_block_tables + (g - 1) * rows.group_table_stride;
  return out;
}

absl::Status ModelRunner::ValidateGroups(const ModelInput& in,
                                         const ForwardOptions& options) const {
  const auto extra = static_cast<int64_t>(num_kv_groups_ - 1);
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  const auto num_seqs = static_cast<int64_t>(in.query_start_loc.size()) - 1;
  const int64_t table_entries = num_seqs * in.max_blocks_per_seq;
  if (static_cast<int64_t>(in.group_slot_mapping.size()) != extra * num_tokens ||
      static_cast<int64_t>(in.group_block_tables.size()) != extra * table_entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelInput: group_slot_mapping has ", in.group_slot_mapping.size(),
                     " entries and group_block_tables ", in.group_block_tables.size(), "; with ",
                     num_kv_groups_, " KV cache groups expected ", extra * num_tokens, " and ",
                     extra * table_entries, " (groups 1.. of slot_mapping and block_tables)"));
  }
  if (extra > 0 && options.hook != nullptr) {
    return absl::InvalidArgumentError(
        "ForwardOptions.hook is not supported with KV cache groups (hybrid KV cache)");
  }
  for (int32_t g = 1; g <= extra; ++g) {
    for (int64_t s = 0; s < num_seqs; ++s) PAGEDKV_RETURN_IF_ERROR(ValidateGroupSequence(in, g, s));
  }
  return absl::OkStatus();
}

// Every block holding a key some token of the sequence reads must be in the pool (a
// sliding-window group may have kNullBlock before the window of its earliest token), and each
// token's slot must agree with the table.
absl::Status ModelRunner::ValidateGroupSequence(const ModelInput& in, int32_t g, int64_t s) const {
  const int32_t bs = options_.block_size;
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  const int64_t stride =
      static_cast<int64_t>(in.query_start_loc.size() - 1) * in.max_blocks_per_seq;
  const BlockId* table =
      in.group_block_tables.data() + (g - 1) * stride + s * in.max_blocks_per_seq;
  const int64_t* slots = in.group_slot_mapping.data() + (g - 1) * num_tokens;
  const int32_t begin = in.query_start_loc[static_cast<size_t>(s)];
  const int32_t end = in.query_start_loc[static_cast<size_t>(s) + 1];
  int32_t first_pos = in.kv_lens[static_cast<size_t>(s)] - 1;
  for (int32_t t = begin; t < end; ++t) first_pos = std::min(first_pos, in.positions[t]);
  const int32_t window = group_window_[static_cast<size_t>(g)];
  const int64_t first_key = window == 0 ? 0 : std::max(0, first_pos - window + 1);
  const int64_t blocks = NumBlocksFor(in.kv_lens[static_cast<size_t>(s)], bs);
  for (int64_t b = 0; b < blocks; ++b) {
    const bool needed = (b + 1) * bs > first_key;
    if (table[b] < (needed ? 0 : kNullBlock) || table[b] >= options_.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModelInput: group ", g, " block table of sequence ", s, " entry ", b, " = ", table[b],
          " is outside [", needed ? 0 : kNullBlock, ", ", options_.num_blocks, ")"));
    }
  }
  for (int32_t t = begin; t < end; ++t) {
    const int32_t pos = in.positions[static_cast<size_t>(t)];
    const int64_t expected = int64_t{table[pos / bs]} * bs + pos % bs;
    if (slots[t] != -1 && slots[t] != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModelInput: group ", g, " slot of token ", t, " = ", slots[t],
          " disagrees with its block table, which puts position ", pos, " at slot ", expected));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::UploadGroups(const ModelInput& in) {
  Backend& b = *backend_;
  const auto slots = static_cast<int64_t>(in.group_slot_mapping.size());
  const auto entries = static_cast<int64_t>(in.group_block_tables.size());
  if (slots > group_slot_capacity_) {
    const int64_t n = Grow(group_slot_capacity_, slots);
    PAGEDKV_ASSIGN_OR_RETURN(group_slots_,
                             DeviceBuffer::Create(b, static_cast<size_t>(n) * sizeof(int64_t)));
    group_slot_capacity_ = n;
  }
  if (entries > group_table_capacity_) {
    const int64_t n = Grow(group_table_capacity_, entries);
    PAGEDKV_ASSIGN_OR_RETURN(group_block_tables_,
                             DeviceBuffer::Create(b, static_cast<size_t>(n) * sizeof(BlockId)));
    group_table_capacity_ = n;
  }
  if (slots > 0) PAGEDKV_RETURN_IF_ERROR(CopySpan(b, group_slots_, in.group_slot_mapping));
  if (entries > 0) PAGEDKV_RETURN_IF_ERROR(CopySpan(b, group_block_tables_, in.group_block_tables));
  return absl::OkStatus();
}

}  // namespace pagedkv
