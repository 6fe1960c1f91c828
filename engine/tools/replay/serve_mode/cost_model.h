// Copyright 2026 The pagedkv Authors.
//
// Roofline cost model of one engine step, for `pagedkv replay --mode serve`'s simulated executor.
// A step's time is max(compute time, memory time) + a fixed overhead, where
//   FLOPs = 2 * params * tokens                                   (every linear layer, LM head)
//         + 4 * layers * q_heads * head_dim * sum over tokens of its context length (attention)
//   bytes = weight bytes (read once per step)
//         + KV bytes per token * (every sequence's context read once + the new tokens written)
// and compute/memory time divide by the GPU's peak FLOP/s and bandwidth times efficiency factors.
// Shifted-position reuse adds a separate memory-bound pass over the KV of re-rotated tokens (keys
// rotated from their old to their new position, values copied; the engine copies registered
// chunks with the same kernel): every layer's K and V of each such token is read and written,
//   rerotation bytes = 2 * KV bytes per token * tokens,
//   rerotation FLOPs = 3 * layers * kv_heads * head_dim * tokens   (6 FLOPs per rotated K pair),
// timed as its own roofline maximum and added to the step (it runs before / after the forward
// pass, not overlapped with it).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(GpuPreset gpu, FindGpuPreset("H200"));
//   PAGEDKV_ASSIGN_OR_RETURN(ModelPreset model, FindModelPreset("llama-3-8b"));
//   RooflineCostModel cost(gpu, model, {});
//   StepWork work;
//   work.AddSequence(/*num_computed_tokens=*/512, /*num_new_tokens=*/128);
//   double seconds = cost.StepSeconds(work);
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_COST_MODEL_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_COST_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/dtype.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

// A GPU's peak numbers (dense BF16 tensor-core FLOP/s, HBM bandwidth, memory).
struct PAGEDKV_EXPORT GpuPreset {
  std::string name;             // "H100", "H200", "A100"
  double peak_flops = 0;        // dense BF16 FLOP/s
  double memory_bandwidth = 0;  // bytes/s
  double memory_bytes = 0;      // HBM capacity in bytes
  // FLOP/s of attention when it runs at another rate than the linear layers (a measured CPU
  // profile); 0 = peak_flops. Scaled by compute_efficiency like peak_flops.
  double attention_flops = 0;
};

// A decoder model's shape, enough for FLOPs and bytes (BF16 weights and KV cache).
struct PAGEDKV_EXPORT ModelPreset {
  std::string name;               // "llama-3-8b", ...
  double num_parameters = 0;      // weights (each 2 bytes)
  int32_t num_layers = 0;         // transformer layers
  int32_t num_q_heads = 0;        // query heads per layer
  int32_t num_kv_heads = 0;       // key/value heads per layer
  int32_t head_dim = 0;           // per-head width
  int32_t bytes_per_element = 2;  // BF16 weights and KV
  // Bytes a weight takes when they differ from the KV's (quantized weights: 0.6 for GGUF Q4_1
  // with its scales); 0 = bytes_per_element.
  double weight_bytes_per_parameter = 0;
  // Attention of each layer, [num_layers]: 0 = full attention, > 0 = a sliding window of that
  // many tokens; empty = every layer full. Read by `--hybrid-kv` (hybrid_cache_replay.h).
  std::vector<int32_t> layer_windows;
  // KV storage when it is not bytes_per_element per value (replay --kv-cache-dtype): each
  // (token, head) row takes KvRowBytes(*kv_dtype, head_dim), scales included.
  std::optional<DType> kv_dtype;
  // V's storage when it differs from K's (replay --kv-cache-dtype-v); unset: as K.
  std::optional<DType> kv_dtype_v;

  // K and V of one token over all layers: layers * kv_heads * (K's row bytes + V's), a row being
  // head_dim * bytes or the dtype's row bytes.
  int64_t KvBytesPerToken() const;
  double WeightBytes() const {
    return num_parameters *
           (weight_bytes_per_parameter > 0 ? weight_bytes_per_parameter : bytes_per_element);
  }
};

PAGEDKV_EXPORT std::vector<GpuPreset> GpuPresets();
PAGEDKV_EXPORT std::vector<ModelPreset> ModelPresets();
// Case-insensitive lookups; InvalidArgument listing the known names otherwise.
PAGEDKV_EXPORT absl::StatusOr<GpuPreset> FindGpuPreset(std::string_view name);
PAGEDKV_EXPORT absl::StatusOr<ModelPreset> FindModelPreset(std::string_view name);

struct PAGEDKV_EXPORT CostModelOptions {
  double compute_efficiency = 0.6;  // achieved fraction of peak FLOP/s (MFU) in (0, 1]
  double memory_efficiency = 0.8;   // achieved fraction of peak bandwidth in (0, 1]
  double step_overhead_s = 0.0005;  // fixed per-step cost (scheduling, launches), seconds
  // false: a step takes max(compute, memory) (a GPU overlaps them); true: compute + memory (a
  // CPU backend whose kernels stream the weights and compute in turn; see hardware_profile.h).
  bool additive = false;
  // Per sequence in the step (sampling, detokenising, streaming its token), seconds; 0 on GPU
  // presets, where that work overlaps the next step.
  double per_sequence_s = 0;
};

// The work of one step: tokens computed and the attention context they see.
struct PAGEDKV_EXPORT StepWork {
  int64_t num_tokens = 0;            // tokens computed (all sequences)
  double attention_context = 0;      // sum over computed tokens of (position + 1)
  int64_t kv_tokens_read = 0;        // sum over sequences of their context length after the step
  int64_t num_rerotated_tokens = 0;  // tokens whose KV a separate pass re-rotates or copies
  int64_t num_sequences = 0;         // sequences in the step (AddSequence calls)

  // Adds a sequence that computes num_new_tokens after num_computed_tokens cached ones.
  void AddSequence(int64_t num_computed_tokens, int64_t num_new_tokens);
};

class PAGEDKV_EXPORT RooflineCostModel {
 public:
  RooflineCostModel(const GpuPreset& gpu, const ModelPreset& model,
                    const CostModelOptions& options);
  double StepFlops(const StepWork& work) const;           // linear layers + attention
  double StepAttentionFlops(const StepWork& work) const;  // the attention part of StepFlops
  double StepBytes(const StepWork& work) const;
  // Seconds of the re-rotation pass over `num_tokens` tokens' KV (see the banner); 0 for none.
  double RerotationSeconds(int64_t num_tokens) const;
  // Seconds for the step: max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth) + overhead
  // (their sum in place of the max when options.additive) + per_sequence_s * num_sequences,
  // plus RerotationSeconds(work.num_rerotated_tokens). 0 for a step with no work at all.
  double StepSeconds(const StepWork& work) const;

 private:
  GpuPreset gpu_;
  ModelPreset model_;
  CostModelOptions options_;
};

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_COST_MODEL_H_
