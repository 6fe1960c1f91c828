// Copyright 2026 The pagedkv Authors.
//
// LayerHook: the model runner's extension point inside a forward pass. ModelRunner::Forward calls
// a hook (ForwardOptions::hook) at two fixed points of every layer, after the layer's Q/K/V
// projections:
//
//   BeforeKvWrite  the layer's pages still hold the K/V earlier steps left in this batch's slots
//   (RoPE + K/V write of the current rows)
//   AfterKvWrite   the fresh K/V are in the pages; attention has not run. The hook may name the
//                  rows that continue (to this layer's attention and every later layer); the
//                  runner then compacts the batch to them.
//
// A view gives the layer, the batch as Forward got it, the input row of each current row, the
// layer's K/V pages, the hidden states entering the layer and the rotated queries (after the K/V
// write), and the runner itself (for ModelRunner::ReadKv, one batched gather per call). Selective
// recompute (CacheBlend, engine/runtime/shift/cache_blend_hook.h) is one implementation: it reads
// the old K/V before the write, the fresh K/V after it, and keeps the rows whose K/V deviate most.
//
// Example:
//   class CountRows final : public LayerHook {
//    public:
//     absl::Status AfterKvWrite(const LayerView& view, std::optional<std::vector<int32_t>>*)
//     override {
//       total_ += static_cast<int64_t>(view.rows.size());
//       return absl::OkStatus();
//     }
//     int64_t total_ = 0;
//   };
//   CountRows hook;
//   PAGEDKV_RETURN_IF_ERROR(runner->Forward(input, {.hook = &hook}, &output));
//
// A hook is called from the thread that runs Forward, in layer order; it is not owned.
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_LAYER_HOOK_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_LAYER_HOOK_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/model/model_config.h"

namespace pagedkv {

class ModelRunner;
struct ModelInput;

// What a hook sees at one point of one layer. Pointers are in the backend's memory and valid for
// the call only.
struct PAGEDKV_EXPORT LayerView {
  int32_t layer = 0;                  // in [0, n_layers)
  const ModelInput* input = nullptr;  // the batch as given to Forward (input rows)
  // Input row of each current row, ascending: every input row until a hook drops rows.
  absl::Span<const int32_t> rows = {};
  const PagedKvLayout* kv = nullptr;  // the layer's pages
  const float* hidden = nullptr;      // [rows.size(), dim]: the residual stream entering the layer
  const float* q = nullptr;           // [rows.size(), q_dim]: queries (rotated in AfterKvWrite)
  ModelRunner* runner = nullptr;      // the runner (ReadKv); do not call Forward from a hook
};

class PAGEDKV_EXPORT LayerHook {
 public:
  virtual ~LayerHook() = default;

  // Checks the hook's own requirements on `input` before Forward writes anything; an error is
  // returned by Forward as is (InvalidArgument for a bad input).
  virtual absl::Status Validate(const ModelInput& /*input*/, const ModelConfig& /*config*/) const {
    return absl::OkStatus();
  }
  // Before the layer's K/V write.
  virtual absl::Status BeforeKvWrite(const LayerView& /*view*/) { return absl::OkStatus(); }
  // After the layer's K/V write, before its attention. To drop rows, set *keep to the current rows
  // (indices into view.rows, ascending, no repeats) that continue; leave it empty to keep all.
  // Rows whose logits are wanted must continue (FailedPrecondition otherwise); dropping every row
  // ends the pass after this layer's K/V write.
  virtual absl::Status AfterKvWrite(const LayerView& /*view*/,
                                    std::optional<std::vector<int32_t>>* /*keep*/) {
    return absl::OkStatus();
  }
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_LAYER_HOOK_H_
