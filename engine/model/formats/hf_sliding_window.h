// Copyright 2026 The pagedkv Authors.
//
// The sliding-window layers of a Hugging Face config.json, as transformers reads them, mapped onto
// ModelConfig::layer_window (query i reads key j iff j <= i and i - j < W).
//
//   MistralForCausalLM: `sliding_window` (an int W >= 1: every layer windowed; null: none; absent:
//     transformers' default 4096). `layer_types` and `use_sliding_window` are not MistralConfig
//     fields and are ignored, as transformers' MistralModel does.
//   Qwen2ForCausalLM: the window is `sliding_window` (absent: 4096; null: none) when
//     `use_sliding_window` is true (absent: false), else none. `layer_types` (a list of
//     "full_attention" / "sliding_attention", one per layer) wins when present; otherwise layers
//     with index >= `max_window_layers` (absent: 28) are windowed when there is a window.
//   LlamaForCausalLM: no sliding window (LlamaConfig has none); nothing is read.
//
// Errors (InvalidArgument naming `where` and the field): a window that is not an integer >= 1, a
// negative max_window_layers, layer_types of the wrong length or with another type string, and
// "sliding_attention" layers without a window (transformers raises there too).
//
// Example:
//   PAGEDKV_RETURN_IF_ERROR(ReadHfSlidingWindow(config_json, "Qwen2ForCausalLM", where, &config));
//   config.LayerWindow(27);  // 4096 with use_sliding_window and max_window_layers = 27
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_HF_SLIDING_WINDOW_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_HF_SLIDING_WINDOW_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "pagedkv/model/model_config.h"

namespace pagedkv::model_internal {

// transformers' default `sliding_window` of MistralConfig and Qwen2Config.
inline constexpr int32_t kHfDefaultSlidingWindow = 4096;
// transformers' default `max_window_layers` of Qwen2Config.
inline constexpr int32_t kHfDefaultMaxWindowLayers = 28;

// Sets config->layer_window from config.json `j` of architecture `arch` (empty when no layer is
// windowed). REQUIRES: j.is_object(); config->n_layers read (> 0). On error config is unchanged.
absl::Status ReadHfSlidingWindow(const nlohmann::json& j, const std::string& arch,
                                 const std::string& where, ModelConfig* config);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_HF_SLIDING_WINDOW_H_
