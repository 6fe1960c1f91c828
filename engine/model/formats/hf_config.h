// Copyright 2026 The pagedkv Authors.
//
// Hugging Face config.json (and generation_config.json) mapped onto ModelConfig and RopeConfig.
//
// Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (q/k/v biases); Mistral's and
// Qwen2's sliding-window layers as engine/model/formats/hf_sliding_window.h reads them
// (sliding_window, use_sliding_window, max_window_layers, layer_types ->
// ModelConfig::layer_window). Fields read: hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, vocab_size, max_position_embeddings (the context
// limit), rms_norm_eps, rope_theta, head_dim (any even width; q_proj is then [heads * head_dim,
// hidden_size]), tie_word_embeddings, rope_scaling (default, linear, dynamic, yarn, llama3),
// bos_token_id, eos_token_id (an int or a list; generation_config.json's wins). RoPE is half-split
// (Hugging Face's rotate_half). Anything that changes the math and is not supported is refused with
// InvalidArgument naming the field and value: another architecture, hidden_act other than silu,
// attention_bias / mlp_bias true, use_sliding_window true on LlamaForCausalLM,
// partial_rotary_factor != 1, quantization_config, an unknown rope_scaling type or key, a bad
// window (hf_sliding_window.h). Other fields are ignored.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(HfConfig hf, ParseHfConfig(config_text, generation_text, "dir"));
//   hf.config.rope->layout == RopeLayout::kHalfSplit;
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_HF_CONFIG_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_HF_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_config.h"

namespace pagedkv::model_internal {

struct PAGEDKV_EXPORT HfConfig {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  ModelConfig config;        // validated; config.rope set; shared_classifier = tie_word_embeddings
};

// Parses config.json's text and generation_config.json's (empty when the file is absent).
// `where` (the directory) prefixes error messages.
PAGEDKV_EXPORT absl::StatusOr<HfConfig> ParseHfConfig(const std::string& config_json,
                                                      const std::string& generation_json,
                                                      const std::string& where);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_HF_CONFIG_H_
