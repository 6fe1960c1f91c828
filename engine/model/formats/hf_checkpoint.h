// Copyright 2026 The pagedkv Authors.
//
// The Hugging Face model directory loader: config.json (+ generation_config.json) and the
// safetensors tensors, converted to fp32 once (or, native, F16 / BF16 matrices kept as stored)
// and packed into ModelWeights.
//
// Tensor names: model.embed_tokens.weight, lm_head.weight (either may be absent when
// tie_word_embeddings is true), model.norm.weight, and per layer N
// model.layers.N.{input_layernorm,post_attention_layernorm}.weight,
// model.layers.N.self_attn.{q,k,v,o}_proj.weight, model.layers.N.mlp.{gate,up,down}_proj.weight,
// and with Qwen2 model.layers.N.self_attn.{q,k,v}_proj.bias. Every shape is checked against
// config.json; an unknown tensor (other than rotary_emb.inv_freq buffers), a missing one or a
// non-finite weight is InvalidArgument naming the file and tensor.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(ModelWeights w, LoadHfWeights("../shared/data/tinystories656K"));
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_HF_CHECKPOINT_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_HF_CHECKPOINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv::model_internal {

// True when `dir` is a directory holding config.json.
PAGEDKV_EXPORT bool IsHfModelDir(const std::string& dir);

// Loads the model in `dir` (see the banner). With WeightStorage::kNative, matrices stored as
// F16 / BF16 keep their 2-byte values (the linear kernels decode them on the fly); F32 ones and
// every vector are fp32 either way. NotFound when config.json or the weights are missing.
PAGEDKV_EXPORT absl::StatusOr<ModelWeights> LoadHfWeights(
    const std::string& dir, WeightStorage storage = WeightStorage::kF32);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_HF_CHECKPOINT_H_
