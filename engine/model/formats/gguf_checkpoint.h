// Copyright 2026 The pagedkv Authors.
//
// GGUF `llama` checkpoints -> ModelConfig and fp32 ModelWeights (every tensor dequantized once
// at load).
//
// Metadata read (llama.cpp's names): general.architecture (must be "llama"), llama.
// {context_length, embedding_length, block_count, feed_forward_length, attention.head_count,
// attention.head_count_kv, attention.layer_norm_rms_epsilon, rope.freq_base,
// rope.dimension_count (must be the head size), vocab_size}, llama.rope.scaling.{type, factor,
// original_context_length} ("none", "linear", "yarn"; Llama-3 frequency tables in a
// rope_freqs.weight tensor are refused by name), tokenizer.ggml.{bos,eos,eot}_token_id, and
// llama.attention.sliding_window (absent or 0: none) with llama.attention.sliding_window_pattern
// (absent: every layer windowed; a bool array, one per layer; or llama.cpp's integer period N:
// layer l windowed iff N == 0 or l % N < N - 1) -> ModelConfig::layer_window.
//
// Tensors: token_embd, output_norm, output (absent: tied to the embedding) and per layer N
// blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}.
// llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) stores attn_q / attn_k rows
// reordered so that each head's RoPE pairs are adjacent (interleaved): Hugging Face row
// h*hd + s*hd/2 + i is stored as row h*hd + 2i + s (s in {0, 1}, i < hd/2). The loader undoes
// that (UnpermuteQk), so the weights are Hugging Face's and RoPE is half-split, exactly as the
// safetensors loader gives for the same model.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open("smollm2.gguf"));
//   PAGEDKV_ASSIGN_OR_RETURN(ModelWeights w, LoadGgufWeights(f));
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_CHECKPOINT_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_CHECKPOINT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/model/formats/gguf_file.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv::model_internal {

// The ModelConfig of a `llama` GGUF file (see the banner); InvalidArgument naming the key.
PAGEDKV_EXPORT absl::StatusOr<ModelConfig> ReadGgufLlamaConfig(const GgufFile& file);

// Loads the weights (see the banner); InvalidArgument naming the tensor for a missing,
// misshapen, unsupported-type, non-finite or unexpected tensor. With kNative, matrices of a type
// the kernels take keep their blocks, read in place from `file`'s mapping (the weights share it,
// GgufFile::mapping; NativeWeightParts::in_place), except Q / K, whose rows are un-permuted
// (whole blocks at a time) into a copy; the pages of the mapping outside those matrices (the
// header, the tensors converted or copied) are then given back (a later read of them maps the
// same bytes back), so only what the weights read stays resident.
PAGEDKV_EXPORT absl::StatusOr<ModelWeights> LoadGgufWeights(
    const GgufFile& file, WeightStorage storage = WeightStorage::kF32);

// Undoes the converter's Q/K row order in place: `w` is [rows, cols] with rows = heads *
// head_dim, stored row h*hd + 2i + s, returned as row h*hd + s*hd/2 + i.
// REQUIRES: head_dim even and dividing rows; w holds rows * cols floats.
PAGEDKV_EXPORT void UnpermuteQk(int64_t rows, int64_t cols, int32_t head_dim, float* w);
// The same over rows of row_bytes bytes (block-format rows). REQUIRES: as above.
PAGEDKV_EXPORT void UnpermuteQkRows(int64_t rows, int64_t row_bytes, int32_t head_dim,
                                    unsigned char* w);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_CHECKPOINT_H_
