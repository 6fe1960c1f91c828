// Copyright 2026 The pagedkv Authors.
//
// ModelConfig: the shape of a Llama-architecture decoder (the llama2.c checkpoint header, or a
// Hugging Face config.json mapped onto it by the Hugging Face loader).
//
// A llama2.c model is: token embedding; n_layers x (RMSNorm, Q/K/V projections, RoPE with
// interleaved pairs and base 10000, causal multi-head attention with GQA, output projection,
// residual, RMSNorm, SwiGLU MLP, residual); final RMSNorm; a classifier that is either the
// embedding matrix itself (shared) or a separate [vocab_size, dim] matrix. Hugging Face models
// set `rope` (half-split pairs, their rope_scaling), optionally q/k/v biases (Qwen2), and their
// BOS and EOS ids.
//
// The attention heads are head_dim wide. llama2.c (and most Llama checkpoints) have head_dim =
// dim / n_heads; Hugging Face's `head_dim` (and GGUF's attention.key_length) may set another
// width, and then q_proj is [n_heads * head_dim, dim], k_proj and v_proj [n_kv_heads * head_dim,
// dim] and o_proj [dim, n_heads * head_dim] (q_dim() and kv_dim() give those widths).
//
// Sliding-window layers (Mistral, Qwen2): layer_window[l] = W > 0 makes layer l attend only to the
// last W positions, transformers' sliding-window causal mask: the query at position i reads key j
// iff j <= i and i - j < W. An empty layer_window (or 0 for a layer) is full causal attention.
//
// Example:
//   pagedkv::ModelConfig config{.dim = 64, .hidden_dim = 172, .n_layers = 4, .n_heads = 4,
//                               .n_kv_heads = 4, .vocab_size = 512, .seq_len = 128};
//   PAGEDKV_RETURN_IF_ERROR(config.Validate());
//   int head_dim = config.head_dim();  // 16
#ifndef PAGEDKV_MODEL_MODEL_CONFIG_H_
#define PAGEDKV_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/rope_config.h"

namespace pagedkv {

struct PAGEDKV_EXPORT ModelConfig {
  int32_t dim = 0;                // width of the residual stream
  int32_t hidden_dim = 0;         // inner width of the SwiGLU MLP
  int32_t n_layers = 0;           // number of transformer layers
  int32_t n_heads = 0;            // query heads per layer
  int32_t n_kv_heads = 0;         // key/value heads per layer (divides n_heads; GQA when fewer)
  int32_t explicit_head_dim = 0;  // width of one head; 0: dim / n_heads (llama2.c)
  int32_t vocab_size = 0;         // number of tokens (rows of the embedding and the classifier)
  int32_t seq_len = 0;            // trained context length: positions 0 .. seq_len-1
  bool shared_classifier = true;  // classifier is the embedding matrix (llama2.c: vocab > 0)
  float rms_norm_eps = 1e-5f;     // epsilon inside every RMSNorm (llama2.c uses 1e-5)
  float rope_base = 10000.0f;     // RoPE base (llama2.c: 10000, interleaved pairs)
  // The checkpoint's RoPE (Hugging Face: half-split pairs, rope_theta, rope_scaling); unset:
  // llama2.c's (interleaved pairs, rope_base, no scaling). Its head_dim equals head_dim().
  std::optional<RopeConfig> rope = std::nullopt;
  bool qkv_bias = false;     // the q/k/v projections add a bias (Qwen2)
  int32_t bos_token_id = 1;  // a prompt's first token (an empty prompt is BOS alone)
  // Tokens that end generation (llama2.c: BOS and EOS, as run.c; Hugging Face:
  // generation_config.json's eos_token_id).
  std::vector<int32_t> stop_token_ids = {1, 2};
  // Per-layer sliding window: empty (every layer full attention) or n_layers entries, each 0 (full
  // attention) or W > 0 (keys j with i - j < W only). See the banner.
  std::vector<int32_t> layer_window = {};

  // Per-head width: explicit_head_dim when set, else dim / n_heads. REQUIRES: Validate().ok().
  int32_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : dim / n_heads; }
  // Width of the Q projection (and of o_proj's input): n_heads * head_dim.
  // REQUIRES: Validate().ok().
  int32_t q_dim() const { return n_heads * head_dim(); }
  // Width of the K and V projections: n_kv_heads * head_dim. REQUIRES: Validate().ok().
  int32_t kv_dim() const { return n_kv_heads * head_dim(); }
  // The sliding window of `layer` (0: full attention). REQUIRES: 0 <= layer < n_layers.
  int32_t LayerWindow(int32_t layer) const {
    return layer_window.empty() ? 0 : layer_window[static_cast<size_t>(layer)];
  }
  // True when some layer has a sliding window.
  bool HasSlidingWindow() const;
  // Number of fp32 parameters (including the classifier when it is not shared).
  // REQUIRES: Validate().ok().
  int64_t NumParameters() const;

  // OK when every field is positive and consistent: n_heads divides dim (unless
  // explicit_head_dim is set; it must not be negative), n_kv_heads divides n_heads, head_dim is
  // even (RoPE rotates pairs), the tensors fit in memory sizes (each below 2^31 elements), `rope`
  // (when set) is valid for head_dim, the BOS and stop ids are inside the vocabulary, and
  // layer_window is empty or has n_layers entries, each >= 0. Otherwise InvalidArgument naming the
  // field.
  absl::Status Validate() const;

  // The part of Validate() for the head counts and head_dim (after the sizes are positive).
  absl::Status ValidateHeads() const;

  // The part of Validate() for rope, bos_token_id and stop_token_ids.
  absl::Status ValidateRopeAndTokens() const;

  // The part of Validate() for layer_window.
  absl::Status ValidateLayerWindow() const;

  // A stable text form of every field, e.g. for a cache's model fingerprint. layer_window is
  // listed only when some layer is windowed, so configs without windows keep their text.
  std::string ToString() const;
};

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_MODEL_CONFIG_H_
