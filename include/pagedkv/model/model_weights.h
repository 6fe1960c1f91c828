// Copyright 2026 The pagedkv Authors.
//
// ModelWeights: the fp32 weights of a llama2.c-shaped model, loaded from a llama2.c checkpoint
// file (here) or from a Hugging Face directory (pagedkv/model/model_source.h), whose tensors are
// converted to fp32 once and packed in the llama2.c order below.
//
// The file format is llama2.c's legacy "v0": a header of 7 int32 (dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means the classifier is a
// separate matrix), then fp32 tensors in this order: token_embedding [vocab, dim], rms_att
// [layers, dim], wq [layers, q_dim, dim], wk [layers, kv_dim, dim], wv [layers, kv_dim, dim], wo
// [layers, dim, q_dim], rms_ffn [layers, dim], w1 [layers, hidden, dim], w2 [layers, dim, hidden],
// w3 [layers, hidden, dim], rms_final [dim], freq_cis_real and freq_cis_imag [seq_len,
// head_dim/2] each (kept in the file for compatibility; RoPE is computed, as run.c does today),
// then wcls [vocab, dim] when not shared. Little-endian, as written by llama2.c's export.
//
// The loader checks the header (positive sizes, heads dividing dim, kv heads dividing heads) and
// that the file size is exactly what the header implies; any problem is InvalidArgument naming
// the file and what is wrong. It never reads past the file's bytes.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::ModelWeights weights,
//                            pagedkv::ModelWeights::LoadLlama2c("aidreams260K.bin"));
//   const pagedkv::ModelConfig& config = weights.config();
//   const float* wq0 = weights.layer(0).wq;  // [dim, dim], row-major, y = x wq^T
#ifndef PAGEDKV_MODEL_MODEL_WEIGHTS_H_
#define PAGEDKV_MODEL_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "pagedkv/model/model_config.h"

namespace pagedkv {

// A matrix [rows, cols] kept in its file's block format (pagedkv/kernels/quant_blocks.h): `rows`
// rows of WeightRowBytes(type, cols) bytes. data null (type kF32): the matrix is fp32, at its
// float pointer.
struct PAGEDKV_EXPORT NativeMatrix {
  const void* data = nullptr;
  WeightType type = WeightType::kF32;
};

// Pointers into one layer's weights. Projections are row-major [out_features, in_features], so a
// projection is y = x W^T (llama2.c's matmul).
struct PAGEDKV_EXPORT LayerWeights {
  const float* rms_att = nullptr;  // [dim]
  const float* wq = nullptr;       // [q_dim, dim] (q_dim = n_heads * head_dim; dim in llama2.c)
  const float* wk = nullptr;       // [kv_dim, dim]
  const float* wv = nullptr;       // [kv_dim, dim]
  const float* wo = nullptr;       // [dim, q_dim]
  const float* rms_ffn = nullptr;  // [dim]
  const float* w1 = nullptr;       // [hidden_dim, dim] (gate)
  const float* w2 = nullptr;       // [dim, hidden_dim] (down)
  const float* w3 = nullptr;       // [hidden_dim, dim] (up)
  // With ModelConfig::qkv_bias (Qwen2), else null: added after the projections.
  const float* bq = nullptr;  // [q_dim]
  const float* bk = nullptr;  // [kv_dim]
  const float* bv = nullptr;  // [kv_dim]
  // The projections kept in block format (their float pointer is then null), else empty.
  NativeMatrix native_wq, native_wk, native_wv, native_wo, native_w1, native_w2, native_w3;
};

// Weights whose matrices may stay in their file's block format (ModelWeights::FromNativeParts).
struct PAGEDKV_EXPORT NativeWeightParts {
  // The llama2.c-order payload (see FromLlama2cPayload) less the native matrices.
  std::vector<float> payload;
  // q/k/v biases as FromParts takes them (empty without ModelConfig::qkv_bias).
  std::vector<float> qkv_bias;
  // The native matrices' rows, matrix after matrix in payload order (but those in `in_place`).
  std::vector<unsigned char> native;
  // One type per matrix in payload order: token_embedding, wq of every layer, then wk, wv, wo,
  // w1, w2, w3 likewise, then wcls when not shared. kF32: in `payload`; else in `native`.
  std::vector<WeightType> matrix_types;
  // Optional, one entry per matrix: non-null for a native matrix whose rows are read where they
  // lie, in a read-only file mapping that `mapping` keeps alive (a GGUF file's blocks), instead
  // of in `native`. Empty: every native matrix is in `native`.
  std::vector<const unsigned char*> in_place;
  std::shared_ptr<const void> mapping;
};

// How a loader keeps the weights in memory.
enum class WeightStorage : uint8_t {
  kNative,  // matrices stay in their file's format where kernels take it (GGUF Q4_0, Q4_1,
            // Q8_0, Q4_K, Q6_K, F16, BF16); everything else is converted to fp32
  kF32,     // every tensor converted to fp32 at load
};

// Options for ModelWeights::Random.
struct PAGEDKV_EXPORT RandomWeightsOptions {
  uint64_t seed = 1;             // seed of the generator; equal seeds give equal weights
  float embedding_scale = 1.0f;  // embedding entries are uniform in [-scale, scale]
  float projection_gain = 1.0f;  // projection entries uniform in +-gain / sqrt(in_features)
};

class PAGEDKV_EXPORT ModelWeights {
 public:
  // Reads and validates a llama2.c v0 checkpoint. InvalidArgument (naming `path`) for a malformed
  // file, NotFound when it cannot be opened.
  static absl::StatusOr<ModelWeights> LoadLlama2c(const std::string& path);

  // Same, from the file's bytes; `name` is used in error messages.
  static absl::StatusOr<ModelWeights> ParseLlama2c(std::string_view bytes, std::string_view name);

  // Weights from the fp32 payload of a llama2.c file (everything after the header, in file
  // order). InvalidArgument when config is invalid (or has qkv_bias: use FromParts) or the
  // payload has the wrong length.
  static absl::StatusOr<ModelWeights> FromLlama2cPayload(const ModelConfig& config,
                                                         std::vector<float> payload);

  // Weights from a llama2.c-order payload (as FromLlama2cPayload) plus, when config.qkv_bias,
  // the q/k/v biases: per layer bq [q_dim], bk [kv_dim], bv [kv_dim], layer after layer
  // (QkvBiasSize(config) floats; empty otherwise). InvalidArgument for wrong lengths.
  static absl::StatusOr<ModelWeights> FromParts(const ModelConfig& config,
                                                std::vector<float> payload,
                                                std::vector<float> qkv_bias);

  // Weights with some matrices in block format (see NativeWeightParts). InvalidArgument for a
  // wrong number of types, a block type whose block size does not divide the matrix's columns, or
  // payload / native sizes that do not match the types.
  static absl::StatusOr<ModelWeights> FromNativeParts(const ModelConfig& config,
                                                      NativeWeightParts parts);

  // Number of floats FromParts expects in qkv_bias. REQUIRES: config.Validate().ok().
  static int64_t QkvBiasSize(const ModelConfig& config);

  // Random weights for `config` (norm weights near 1), e.g. for benchmarks and studies that
  // must run without a checkpoint. InvalidArgument when config is invalid.
  static absl::StatusOr<ModelWeights> Random(const ModelConfig& config,
                                             const RandomWeightsOptions& options = {});

  // Number of fp32 values in the payload that `config` implies. REQUIRES: config.Validate().ok().
  static int64_t PayloadSize(const ModelConfig& config);

  ModelWeights(ModelWeights&&) = default;
  ModelWeights& operator=(ModelWeights&&) = default;
  ModelWeights(const ModelWeights&) = delete;
  ModelWeights& operator=(const ModelWeights&) = delete;

  const ModelConfig& config() const { return config_; }
  // REQUIRES: 0 <= index < config().n_layers.
  const LayerWeights& layer(int index) const { return layers_[static_cast<size_t>(index)]; }
  const float* token_embedding() const { return token_embedding_; }  // [vocab_size, dim]
  const float* rms_final() const { return rms_final_; }              // [dim]
  // The classifier (LM head) [vocab_size, dim]: the embedding when shared.
  const float* classifier() const { return classifier_; }
  // The embedding / classifier in block format (their float pointer is then null), else empty.
  const NativeMatrix& native_token_embedding() const { return native_token_embedding_; }
  const NativeMatrix& native_classifier() const { return native_classifier_; }
  // True when any matrix is kept in block format.
  bool has_native() const { return !native_.empty() || !in_place_.empty(); }
  // Bytes of weights (fp32 payload, biases and native matrices, in place ones included).
  int64_t weight_bytes() const;
  // Bytes of the native matrices read in place from the model file's read-only mapping
  // (NativeWeightParts::in_place): the GGUF matrices whose rows the loader does not reorder.
  int64_t in_place_bytes() const;
  // Gives back the resident pages of [data, data + bytes) when that lies in one in-place
  // matrix: a holder of a repacked copy that alone is read (the CPU backend's Int8Tiles) then
  // does not keep the rows resident too. A later read of those rows maps them again from the
  // file: the same bytes while the file is unchanged (truncating or rewriting the file in place
  // under a running process is not supported: a read may then fault with SIGBUS or see the new
  // bytes, as with llama.cpp's mmap). Returns true when released, false (nothing done) for rows
  // held in memory; Internal when the kernel refuses (madvise). Contents never change.
  absl::StatusOr<bool> ReleaseInPlaceRows(const void* data, int64_t bytes) const;

 private:
  ModelWeights() = default;
  void BindPointers();

  ModelConfig config_;
  std::vector<float> payload_;   // the file's fp32 payload, in file order
  std::vector<float> qkv_bias_;  // [n_layers, q_dim + 2 kv_dim] with config_.qkv_bias, else empty
  std::vector<unsigned char> native_;     // block-format matrices (NativeWeightParts::native)
  std::vector<WeightType> matrix_types_;  // empty: every matrix fp32
  // NativeWeightParts::in_place (empty when it holds no matrix) and what keeps it alive.
  std::vector<const unsigned char*> in_place_;
  std::shared_ptr<const void> mapping_;
  NativeMatrix native_token_embedding_;
  NativeMatrix native_classifier_;
  std::vector<LayerWeights> layers_;
  const float* token_embedding_ = nullptr;
  const float* rms_final_ = nullptr;
  const float* classifier_ = nullptr;
};

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_MODEL_WEIGHTS_H_
