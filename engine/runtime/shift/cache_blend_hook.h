// Copyright 2026 The pagedkv Authors.
//
// CacheBlendHook: CacheBlend's selective recompute as a LayerHook of the model runner
// (engine/model/runner/layer_hook.h). The rows of a BlendGroup already have K/V in their slots at
// every layer (e.g. re-rotated from a chunk cached at another position). They run through layers
// 0..deviation_layer like every row, overwriting those layers' K/V with fresh values; at
// deviation_layer the hook reads the groups' K/V just before the layer's write and just after it
// (one batched gather each), and only the num_keep most deviating rows of each group continue
// through the later layers. The others keep their old K/V above deviation_layer. With
// num_keep == num_rows the pass equals a plain one.
//
// Example:
//   const std::vector<BlendGroup> groups = {{.first_row = 0, .num_rows = 12, .num_keep = 2}};
//   CacheBlendHook hook(groups, /*deviation_layer=*/1);
//   PAGEDKV_RETURN_IF_ERROR(runner->Forward(input, {.hook = &hook}, &output));
//   // hook.kept_rows(): the 2 rows of 0..11 that went through every layer.
//
// One hook serves one Forward call (kept_rows() describes the last one). Not thread-safe.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_CACHE_BLEND_HOOK_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_CACHE_BLEND_HOOK_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/model/runner/layer_hook.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv {

// A group of batch rows for selective recompute.
struct PAGEDKV_EXPORT BlendGroup {
  int32_t first_row = 0;  // first batch row of the group
  int32_t num_rows = 0;   // rows [first_row, first_row + num_rows), all of one sequence; >= 1
  int32_t num_keep = 0;   // most deviating rows that go on past deviation_layer; in [0, num_rows]
};

// What a token's deviation sums: its K and V elements (CacheBlend's paper, ShiftedPrefill), or
// its V elements only (CacheBlend's public code: values' squared difference summed over heads).
enum class BlendScore {
  kKeyValue,
  kValue,
};

// How many of `n` tokens CacheBlend recomputes at `fraction`: ceil(fraction * n) in [0, n].
// REQUIRES: 0 <= fraction <= 1, n >= 0.
PAGEDKV_EXPORT int32_t NumToRecompute(double fraction, int32_t n);

// The `count` tokens whose K/V deviates most between copy a and copy b, as ascending indices.
// Token j's deviation is the sum, in double, of the squared differences of its `width` K elements
// and its `width` V elements (CacheBlend's KV deviation; ShiftedPrefill and CacheBlendHook both
// rank with it); ties go to the smaller index. Spans are [num_tokens, width], row-major.
// REQUIRES: the four spans have the same size, a multiple of width > 0; 0 <= count <= num_tokens.
// `score` kValue leaves the K spans out of the sum (they may then be empty).
PAGEDKV_EXPORT std::vector<int32_t> MostDeviatingTokens(std::span<const float> k_a,
                                                        std::span<const float> v_a,
                                                        std::span<const float> k_b,
                                                        std::span<const float> v_b, int64_t width,
                                                        int32_t count,
                                                        BlendScore score = BlendScore::kKeyValue);

class PAGEDKV_EXPORT CacheBlendHook final : public LayerHook {
 public:
  // `groups`: sorted by first_row, non-overlapping, each inside one sequence, with slots (not -1)
  // and no row in logits_indices (Validate checks it). Empty: the hook does nothing.
  // `deviation_layer`: the layer whose K/V deviation ranks the rows; [0, n_layers).
  // `score`: what the deviation sums (K and V, or V only). `groups` is copied.
  CacheBlendHook(absl::Span<const BlendGroup> groups, int32_t deviation_layer,
                 BlendScore score = BlendScore::kKeyValue);

  absl::Status Validate(const ModelInput& input, const ModelConfig& config) const override;
  absl::Status BeforeKvWrite(const LayerView& view) override;
  absl::Status AfterKvWrite(const LayerView& view,
                            std::optional<std::vector<int32_t>>* keep) override;

  // The group rows (input rows) that went through every layer in the last Forward, ascending.
  const std::vector<int32_t>& kept_rows() const { return kept_rows_; }

 private:
  // The slots of every group row, in group order.
  std::vector<int64_t> GroupSlots(const ModelInput& input) const;

  std::vector<BlendGroup> groups_;
  int32_t deviation_layer_ = 0;
  BlendScore score_ = BlendScore::kKeyValue;
  std::vector<float> k_old_, v_old_;  // the groups' K/V at deviation_layer before the write
  std::vector<int32_t> kept_rows_;
};

// The selective-recompute hook of `batch`'s forward pass for a ShiftedChunkReuse with `options`:
// one BlendGroup per sequence with blend tokens (its first num_blend_tokens rows;
// NumToRecompute(options.recompute_fraction, rows) kept), ranked at options.deviation_layer.
// nullopt when the batch has no blend tokens.
PAGEDKV_EXPORT std::optional<CacheBlendHook> MakeBlendHook(const ScheduledBatch& batch,
                                                           const ShiftedChunkReuseOptions& options);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_CACHE_BLEND_HOOK_H_
