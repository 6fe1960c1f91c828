// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/layer_prefix_weights.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pagedkv {

absl::StatusOr<ModelWeights> LayerPrefixWeights(const ModelWeights& weights, int32_t num_layers) {
  const ModelConfig& full = weights.config();
  if (num_layers < 1 || num_layers > full.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("LayerPrefixWeights: num_layers = ", num_layers,
                                                   " must lie in [1, ", full.n_layers, "]"));
  }
  if (weights.has_native()) {
    return absl::InvalidArgumentError(
        "LayerPrefixWeights: the weights keep matrices in block format; load the model with fp32 "
        "weights (WeightStorage::kF32, --weights f32)");
  }
  ModelConfig config = full;
  config.n_layers = num_layers;
  const int64_t d = config.dim, h = config.hidden_dim, q = config.q_dim(), kv = config.kv_dim();
  std::vector<float> payload;
  payload.reserve(static_cast<size_t>(ModelWeights::PayloadSize(config)));
  auto append_to = [](std::vector<float>& out, const float* src, int64_t count) {
    out.insert(out.end(), src, src + count);
  };
  auto append = [&](const float* src, int64_t count) { append_to(payload, src, count); };
  append(weights.token_embedding(), int64_t{config.vocab_size} * d);
  // llama2.c's file order: each tensor kind for every layer, kind after kind.
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).rms_att, d);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).wq, q * d);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).wk, kv * d);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).wv, kv * d);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).wo, d * q);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).rms_ffn, d);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).w1, h * d);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).w2, d * h);
  for (int32_t l = 0; l < num_layers; ++l) append(weights.layer(l).w3, h * d);
  append(weights.rms_final(), d);
  // freq_cis tables: unused (RoPE is computed), kept so the payload has llama2.c's length.
  payload.resize(payload.size() + static_cast<size_t>(config.seq_len) * config.head_dim(), 0.0f);
  if (!config.shared_classifier) append(weights.classifier(), int64_t{config.vocab_size} * d);
  std::vector<float> bias;  // q/k/v biases (Qwen2), layer after layer
  for (int32_t l = 0; l < num_layers && config.qkv_bias; ++l) {
    append_to(bias, weights.layer(l).bq, q);
    append_to(bias, weights.layer(l).bk, kv);
    append_to(bias, weights.layer(l).bv, kv);
  }
  return ModelWeights::FromParts(config, std::move(payload), std::move(bias));
}

}  // namespace pagedkv
