// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/cost_model.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pagedkv::replay {

int64_t ModelPreset::KvBytesPerToken() const {
  const int64_t k_row = kv_dtype.has_value() ? KvRowBytes(*kv_dtype, head_dim)
                                             : int64_t{head_dim} * bytes_per_element;
  const int64_t v_row = kv_dtype_v.has_value() ? KvRowBytes(*kv_dtype_v, head_dim) : k_row;
  return int64_t{num_layers} * num_kv_heads * (k_row + v_row);
}

std::vector<GpuPreset> GpuPresets() {
  // Vendor datasheet numbers: dense BF16 (no sparsity), SXM parts.
  return {
      {.name = "H100", .peak_flops = 989e12, .memory_bandwidth = 3.35e12, .memory_bytes = 80e9},
      {.name = "H200", .peak_flops = 989e12, .memory_bandwidth = 4.8e12, .memory_bytes = 141e9},
      {.name = "A100", .peak_flops = 312e12, .memory_bandwidth = 2.039e12, .memory_bytes = 80e9},
  };
}

namespace {

// `layers` windows where every `period`-th layer (the last of each period) is full attention
// and the others have a `window`-token sliding window.
std::vector<int32_t> AlternatingWindows(int32_t layers, int32_t window, int32_t period) {
  std::vector<int32_t> windows(layers, window);
  for (int32_t l = period - 1; l < layers; l += period) windows[l] = 0;
  return windows;
}

}  // namespace

std::vector<ModelPreset> ModelPresets() {
  // Shapes from the models' published configs.
  return {
      {.name = "llama-3-8b",
       .num_parameters = 8.03e9,
       .num_layers = 32,
       .num_q_heads = 32,
       .num_kv_heads = 8,
       .head_dim = 128},
      {.name = "llama-3-70b",
       .num_parameters = 70.6e9,
       .num_layers = 80,
       .num_q_heads = 64,
       .num_kv_heads = 8,
       .head_dim = 128},
      {.name = "llama-2-7b",
       .num_parameters = 6.74e9,
       .num_layers = 32,
       .num_q_heads = 32,
       .num_kv_heads = 32,
       .head_dim = 128},
      {.name = "mistral-7b",
       .num_parameters = 7.24e9,
       .num_layers = 32,
       .num_q_heads = 32,
       .num_kv_heads = 8,
       .head_dim = 128},
      {.name = "qwen2.5-7b",
       .num_parameters = 7.62e9,
       .num_layers = 28,
       .num_q_heads = 28,
       .num_kv_heads = 4,
       .head_dim = 128},
      // gpt-oss-20b (config.json): 24 layers alternating a 128-token sliding window and full
      // attention (layer_types: sliding first), 64 query / 8 KV heads of 64. A mixture of
      // experts: 20.9e9 weights, 3.6e9 active per token; the cost model counts the active ones.
      {.name = "gpt-oss-20b",
       .num_parameters = 3.6e9,
       .num_layers = 24,
       .num_q_heads = 64,
       .num_kv_heads = 8,
       .head_dim = 64,
       .layer_windows = AlternatingWindows(24, 128, 2)},
      // gemma-3-27b (config.json): 62 layers, five with a 1,024-token window per full one
      // (sliding_window_pattern 6), 32 query / 16 KV heads of 128.
      {.name = "gemma-3-27b",
       .num_parameters = 27.4e9,
       .num_layers = 62,
       .num_q_heads = 32,
       .num_kv_heads = 16,
       .head_dim = 128,
       .layer_windows = AlternatingWindows(62, 1024, 6)},
      // SmolLM2-135M(-Instruct): the model the CPU serving benchmarks run (tied LM head counted
      // once, as it is computed once per token).
      {.name = "smollm2-135m",
       .num_parameters = 134.5e6,
       .num_layers = 30,
       .num_q_heads = 9,
       .num_kv_heads = 3,
       .head_dim = 64},
  };
}

namespace {

template <typename T>
absl::StatusOr<T> FindByName(const std::vector<T>& presets, std::string_view name,
                             std::string_view what) {
  std::vector<std::string> names;
  for (const T& p : presets) {
    if (absl::AsciiStrToLower(p.name) == absl::AsciiStrToLower(std::string(name))) return p;
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(absl::StrFormat("unknown %s \"%s\"; expected one of: %s", what,
                                                    name, absl::StrJoin(names, ", ")));
}

}  // namespace

absl::StatusOr<GpuPreset> FindGpuPreset(std::string_view name) {
  return FindByName(GpuPresets(), name, "GPU");
}

absl::StatusOr<ModelPreset> FindModelPreset(std::string_view name) {
  return FindByName(ModelPresets(), name, "model");
}

void StepWork::AddSequence(int64_t num_computed_tokens, int64_t num_new_tokens) {
  const double c = static_cast<double>(num_computed_tokens);
  const double n = static_cast<double>(num_new_tokens);
  num_tokens += num_new_tokens;
  // Token at position p attends to p + 1 keys: sum_{p=c}^{c+n-1} (p + 1).
  attention_context += n * c + n * (n + 1) / 2;
  kv_tokens_read += num_computed_tokens + num_new_tokens;
  ++num_sequences;
}

RooflineCostModel::RooflineCostModel(const GpuPreset& gpu, const ModelPreset& model,
                                     const CostModelOptions& options)
    : gpu_(gpu), model_(model), options_(options) {}

double RooflineCostModel::StepAttentionFlops(const StepWork& work) const {
  return 4.0 * model_.num_layers * model_.num_q_heads * model_.head_dim * work.attention_context;
}

double RooflineCostModel::StepFlops(const StepWork& work) const {
  const double linear = 2.0 * model_.num_parameters * static_cast<double>(work.num_tokens);
  return linear + StepAttentionFlops(work);
}

double RooflineCostModel::StepBytes(const StepWork& work) const {
  const double kv = static_cast<double>(model_.KvBytesPerToken()) *
                    static_cast<double>(work.kv_tokens_read + work.num_tokens);
  return model_.WeightBytes() + kv;
}

double RooflineCostModel::RerotationSeconds(int64_t num_tokens) const {
  if (num_tokens <= 0) return 0;
  const auto n = static_cast<double>(num_tokens);
  const double bytes = 2.0 * static_cast<double>(model_.KvBytesPerToken()) * n;
  const double flops = 3.0 * model_.num_layers * model_.num_kv_heads * model_.head_dim * n;
  return std::max(flops / (gpu_.peak_flops * options_.compute_efficiency),
                  bytes / (gpu_.memory_bandwidth * options_.memory_efficiency));
}

double RooflineCostModel::StepSeconds(const StepWork& work) const {
  if (work.num_tokens == 0 && work.num_rerotated_tokens == 0) return 0;
  double seconds = options_.step_overhead_s + RerotationSeconds(work.num_rerotated_tokens);
  if (work.num_tokens > 0) {
    const double attention = StepAttentionFlops(work);
    const double attention_rate = gpu_.attention_flops > 0 ? gpu_.attention_flops : gpu_.peak_flops;
    const double compute =
        (StepFlops(work) - attention) / (gpu_.peak_flops * options_.compute_efficiency) +
        attention / (attention_rate * options_.compute_efficiency);
    const double memory = StepBytes(work) / (gpu_.memory_bandwidth * options_.memory_efficiency);
    seconds += options_.additive ? compute + memory : std::max(compute, memory);
    seconds += options_.per_sequence_s * static_cast<double>(work.num_sequences);
  }
  return seconds;
}

}  // namespace pagedkv::replay
