// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/cache_blend_hook.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/model/runner/model_runner.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

int32_t NumToRecompute(double fraction, int32_t n) {
  const double want = std::ceil(fraction * static_cast<double>(n));
  return static_cast<int32_t>(std::clamp(want, 0.0, static_cast<double>(n)));
}

std::vector<int32_t> MostDeviatingTokens(std::span<const float> k_a, std::span<const float> v_a,
                                         std::span<const float> k_b, std::span<const float> v_b,
                                         int64_t width, int32_t count, BlendScore score) {
  const bool with_keys = score == BlendScore::kKeyValue;
  const size_t w = static_cast<size_t>(width);
  const size_t n = v_a.size() / w;
  std::vector<std::pair<double, int32_t>> deviation;
  deviation.reserve(n);
  for (size_t j = 0; j < n; ++j) {
    double sum = 0.0;
    for (size_t e = j * w; e < (j + 1) * w; ++e) {
      const double dk = with_keys ? double{k_a[e]} - k_b[e] : 0.0;
      const double dv = double{v_a[e]} - v_b[e];
      sum += dk * dk + dv * dv;
    }
    deviation.emplace_back(sum, static_cast<int32_t>(j));
  }
  const auto pick = std::min(n, static_cast<size_t>(std::max(count, 0)));
  std::partial_sort(deviation.begin(), deviation.begin() + static_cast<std::ptrdiff_t>(pick),
                    deviation.end(), [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  std::vector<int32_t> picked;
  picked.reserve(pick);
  for (size_t j = 0; j < pick; ++j) picked.push_back(deviation[j].second);
  std::sort(picked.begin(), picked.end());
  return picked;
}

CacheBlendHook::CacheBlendHook(absl::Span<const BlendGroup> groups, int32_t deviation_layer,
                               BlendScore score)
    : groups_(groups.begin(), groups.end()), deviation_layer_(deviation_layer), score_(score) {}

absl::Status CacheBlendHook::Validate(const ModelInput& in, const ModelConfig& config) const {
  if (groups_.empty()) return absl::OkStatus();
  if (deviation_layer_ < 0 || deviation_layer_ >= config.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("ModelInput: blend_layer = ", deviation_layer_,
                                                   " is outside [0, ", config.n_layers, ")"));
  }
  const auto num_tokens = static_cast<int32_t>(in.token_ids.size());
  int32_t end = 0;
  size_t seq = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const BlendGroup& group = groups_[g];
    if (group.num_rows < 1 || group.first_row < end ||
        int64_t{group.first_row} + group.num_rows > num_tokens || group.num_keep < 0 ||
        group.num_keep > group.num_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModelInput: blend group ", g, " (first_row ", group.first_row, ", num_rows ",
          group.num_rows, ", num_keep ", group.num_keep,
          ") needs num_rows >= 1 inside the batch, no overlap with the previous group, and "
          "num_keep in [0, num_rows]"));
    }
    end = group.first_row + group.num_rows;
    while (in.query_start_loc[seq + 1] <= group.first_row) ++seq;
    if (end > in.query_start_loc[seq + 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelInput: blend group ", g, " spans more than one sequence"));
    }
    for (int32_t t = group.first_row; t < end; ++t) {
      if (in.slot_mapping[static_cast<size_t>(t)] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("ModelInput: blend group ", g, " row ", t,
                                                       " has no KV slot (slot_mapping -1)"));
      }
    }
  }
  for (int32_t row : in.logits_indices) {
    auto it =
        std::upper_bound(groups_.begin(), groups_.end(), row,
                         [](int32_t r, const BlendGroup& group) { return r < group.first_row; });
    if (it != groups_.begin() && row < std::prev(it)->first_row + std::prev(it)->num_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelInput: logits row ", row, " lies in a blend group"));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> CacheBlendHook::GroupSlots(const ModelInput& in) const {
  std::vector<int64_t> slots;
  for (const BlendGroup& group : groups_) {
    slots.insert(slots.end(), in.slot_mapping.begin() + group.first_row,
                 in.slot_mapping.begin() + group.first_row + group.num_rows);
  }
  return slots;
}

absl::Status CacheBlendHook::BeforeKvWrite(const LayerView& view) {
  if (view.layer == 0) kept_rows_.clear();
  if (groups_.empty() || view.layer != deviation_layer_) return absl::OkStatus();
  return view.runner->ReadKv(view.layer, GroupSlots(*view.input), &k_old_, &v_old_);
}

absl::Status CacheBlendHook::AfterKvWrite(const LayerView& view,
                                          std::optional<std::vector<int32_t>>* keep) {
  if (groups_.empty() || view.layer != deviation_layer_) return absl::OkStatus();
  std::vector<float> k_new, v_new;
  const std::vector<int64_t> slots = GroupSlots(*view.input);  // not empty: groups have rows
  PAGEDKV_RETURN_IF_ERROR(view.runner->ReadKv(view.layer, slots, &k_new, &v_new));
  // Floats per token as ReadKv returns them (a quantized row is decoded: not its stored units).
  const auto width = static_cast<int64_t>(k_new.size() / slots.size());
  // Input rows that continue: every row outside the groups, and the picked rows of each group.
  std::vector<char> continues(view.input->token_ids.size(), 1);
  size_t offset = 0;  // group rows before the current group
  for (const BlendGroup& group : groups_) {
    const auto span = [&](const std::vector<float>& all) {
      return std::span<const float>(all).subspan(offset * static_cast<size_t>(width),
                                                 static_cast<size_t>(group.num_rows * width));
    };
    std::fill_n(continues.begin() + group.first_row, group.num_rows, 0);
    for (int32_t j : MostDeviatingTokens(span(k_old_), span(v_old_), span(k_new), span(v_new),
                                         width, group.num_keep, score_)) {
      continues[static_cast<size_t>(group.first_row + j)] = 1;
      kept_rows_.push_back(group.first_row + j);
    }
    offset += static_cast<size_t>(group.num_rows);
  }
  keep->emplace();
  for (size_t i = 0; i < view.rows.size(); ++i) {
    if (continues[static_cast<size_t>(view.rows[i])])
      keep->value().push_back(static_cast<int32_t>(i));
  }
  return absl::OkStatus();
}

std::optional<CacheBlendHook> MakeBlendHook(const ScheduledBatch& batch,
                                            const ShiftedChunkReuseOptions& options) {
  std::vector<BlendGroup> groups;
  for (const ScheduledSequence& s : batch.sequences) {
    if (s.num_blend_tokens <= 0) continue;
    groups.push_back(
        BlendGroup{.first_row = s.query_start,
                   .num_rows = s.num_blend_tokens,
                   .num_keep = NumToRecompute(options.recompute_fraction, s.num_blend_tokens)});
  }
  if (groups.empty()) return std::nullopt;
  return CacheBlendHook(groups, options.deviation_layer);
}

}  // namespace pagedkv
