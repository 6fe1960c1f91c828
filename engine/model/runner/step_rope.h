// Copyright 2026 The pagedkv Authors.
//
// StepRope: the RoPE each sequence of one step is rotated with. For every scaling but Hugging
// Face's `dynamic` one that is the runner's table. Under dynamic NTK scaling with
// RopeConfig::dynamic_seq_len = 0 (the per-step mode, what a config.json `dynamic` maps to) a
// sequence whose length after the step, L = kv_len, passes max_position_embeddings gets the
// frequencies of base * (factor * L / max_pos - (factor - 1))^(d / (d - 2)), as transformers'
// dynamic_rope_update recomputes them from the positions of each forward call. Those frequencies
// rotate the step's queries and the keys it writes; keys already cached keep the base they were
// written with (transformers caches keys rotated, too).
//
// Example (inside the runner, before the layers of a step):
//   PAGEDKV_RETURN_IF_ERROR(step_rope_.Prepare(backend, rope_config_, rope_view_, in.kv_lens));
//   const RopeTableView& view = step_rope_.ForSequence(s);
//
// Not thread-safe.
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_STEP_ROPE_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_STEP_ROPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/model/runner/backend.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"

namespace pagedkv {

// True when `config` rotates a step with the frequencies of its sequence's length (dynamic NTK
// in the per-step mode), so a cached key depends on the step that wrote it.
PAGEDKV_EXPORT bool RopeDependsOnStepLength(const RopeConfig& config);

// `config` with the frequencies of a sequence of `length` tokens (the per-step mode's
// dynamic_seq_len set to it). REQUIRES: RopeDependsOnStepLength(config).
RopeConfig RopeForLength(const RopeConfig& config, int64_t length);

class StepRope {
 public:
  // Works out the view of each sequence (kv_lens[s] is its length after the step), uploading the
  // frequencies to `backend` when it is not host memory. `default_view` is the runner's table for
  // `config` and must outlive the next Prepare. ResourceExhausted when memory runs out.
  absl::Status Prepare(Backend& backend, const RopeConfig& config,
                       const RopeTableView& default_view, absl::Span<const int32_t> kv_lens);

  // True when every sequence of the step uses the default view.
  bool Uniform() const { return entry_of_seq_.empty(); }
  // The view of sequence `seq`. REQUIRES: 0 <= seq < kv_lens.size() of the last Prepare.
  const RopeTableView& ForSequence(int64_t seq) const;

 private:
  RopeTableView default_;
  std::vector<int32_t> entry_of_seq_;  // per sequence: index into views_, or -1 (default)
  std::vector<RopeTableView> views_;   // one per sequence length past max_position_embeddings
  std::vector<char> host_;             // per view: the cos/sin of position 0, then inv_freq
  DeviceBuffer device_;                // host_ on a device backend (grown, never shrunk)
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_STEP_ROPE_H_
