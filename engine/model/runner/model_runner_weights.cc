// Copyright 2026 The pagedkv Authors.
//
// ModelRunner weights: where they live (the backend's memory, or kept in block format on the CPU
// backend, NativeMatrix) and the ops that read them either way: the embedding gather, the
// projections and every other matrix product.
#include <cstdint>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/model_runner.h"
#include "engine/model/runner/runner_buffers.h"
#include "pagedkv/dtype.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

using runner_internal::Upload;

absl::StatusOr<const float*> ModelRunner::PlaceTensor(const float* host, int64_t count) {
  if (host == nullptr) return nullptr;  // a matrix kept in block format (NativeMatrix)
  if (backend_->host_memory()) {        // weights are constant while the runner (and backend) lives
    PAGEDKV_RETURN_IF_ERROR(
        backend_->DeclareConstant(host, static_cast<size_t>(count) * sizeof(float)));
    return host;
  }
  PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           Upload(*backend_, host, static_cast<size_t>(count) * sizeof(float)));
  const float* ptr = buffer.as<const float>();
  uploaded_weights_.push_back(std::move(buffer));
  return ptr;
}

absl::Status ModelRunner::PrepareNativeMatrices() {
  if (!weights_->has_native() || !backend_->host_memory()) return absl::OkStatus();
  const ModelConfig& c = weights_->config();
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  // Rows read in place from the model file whose only reader is now the backend's copy (the
  // int8 kernel's tiles) stop being resident; a later reader (the embedding gather of a tied
  // table, another runner) maps them back from the file, the same bytes.
  auto declare = [&](const NativeMatrix& m, int64_t rows, int64_t cols) -> absl::Status {
    if (m.data == nullptr) return absl::OkStatus();
    const int64_t bytes = rows * WeightRowBytes(m.type, cols);
    PAGEDKV_RETURN_IF_ERROR(backend_->DeclareConstant(m.data, static_cast<size_t>(bytes)));
    PAGEDKV_ASSIGN_OR_RETURN(
        const bool copied,
        backend_->PrepareQuantWeights(m.data, m.type, rows, cols, options_.activations));
    if (copied) return weights_->ReleaseInPlaceRows(m.data, bytes).status();
    return absl::OkStatus();
  };
  PAGEDKV_RETURN_IF_ERROR(declare(weights_->native_token_embedding(), c.vocab_size, d));
  PAGEDKV_RETURN_IF_ERROR(declare(weights_->native_classifier(), c.vocab_size, d));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_->layer(l);
    for (auto [m, rows, cols] : {std::tuple{&w.native_wq, q, d}, std::tuple{&w.native_wk, kv, d},
                                 std::tuple{&w.native_wv, kv, d}, std::tuple{&w.native_wo, d, q},
                                 std::tuple{&w.native_w1, h, d}, std::tuple{&w.native_w2, d, h},
                                 std::tuple{&w.native_w3, h, d}}) {
      PAGEDKV_RETURN_IF_ERROR(declare(*m, rows, cols));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::PlaceWeights() {
  const ModelConfig& c = weights_->config();
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  if (weights_->has_native()) {
    if (!backend_->host_memory()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weights kept in block format (native) run on the CPU backend only; load the model "
          "with fp32 weights (--weights f32) for backend ",
          backend_->name()));
    }
  }
  native_token_embedding_ = weights_->native_token_embedding();
  native_classifier_ = weights_->native_classifier();
  PAGEDKV_RETURN_IF_ERROR(PrepareNativeMatrices());
  PAGEDKV_ASSIGN_OR_RETURN(token_embedding_,
                           PlaceTensor(weights_->token_embedding(), int64_t{c.vocab_size} * d));
  PAGEDKV_ASSIGN_OR_RETURN(rms_final_, PlaceTensor(weights_->rms_final(), d));
  if (c.shared_classifier) {
    classifier_ = token_embedding_;
  } else {
    PAGEDKV_ASSIGN_OR_RETURN(classifier_,
                             PlaceTensor(weights_->classifier(), int64_t{c.vocab_size} * d));
  }
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& src = weights_->layer(l);
    LayerWeights& dst = layers_[static_cast<size_t>(l)];
    dst = src;  // the native matrices (host memory); the pointers are placed below
    PAGEDKV_ASSIGN_OR_RETURN(dst.rms_att, PlaceTensor(src.rms_att, d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wq, PlaceTensor(src.wq, q * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wk, PlaceTensor(src.wk, kv * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wv, PlaceTensor(src.wv, kv * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wo, PlaceTensor(src.wo, d * q));
    PAGEDKV_ASSIGN_OR_RETURN(dst.rms_ffn, PlaceTensor(src.rms_ffn, d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w1, PlaceTensor(src.w1, h * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w2, PlaceTensor(src.w2, d * h));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w3, PlaceTensor(src.w3, h * d));
    if (c.qkv_bias) {
      PAGEDKV_ASSIGN_OR_RETURN(dst.bq, PlaceTensor(src.bq, q));
      PAGEDKV_ASSIGN_OR_RETURN(dst.bk, PlaceTensor(src.bk, kv));
      PAGEDKV_ASSIGN_OR_RETURN(dst.bv, PlaceTensor(src.bv, kv));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::GatherEmbeddings(int64_t num_tokens) {
  Backend& b = *backend_;
  if (native_token_embedding_.data != nullptr) {
    return b.QuantEmbeddingGather({.table = native_token_embedding_.data,
                                   .table_type = native_token_embedding_.type,
                                   .token_ids = token_ids_.as<const int32_t>(),
                                   .out = x_.as<float>(),
                                   .num_tokens = num_tokens,
                                   .vocab_size = config().vocab_size,
                                   .dim = config().dim});
  }
  return b.EmbeddingGather({.table = token_embedding_,
                            .token_ids = token_ids_.as<const int32_t>(),
                            .out = x_.as<float>(),
                            .num_tokens = num_tokens,
                            .vocab_size = config().vocab_size,
                            .dim = config().dim});
}

absl::Status ModelRunner::MatMul(const LinearArgs& a, const NativeMatrix& native) {
  if (native.data == nullptr) return backend_->Linear(a);
  return backend_->QuantLinear({.x = a.x,
                                .w = native.data,
                                .w_type = native.type,
                                .y = a.y,
                                .m = a.m,
                                .n = a.n,
                                .k = a.k,
                                .accumulate = a.accumulate,
                                .activations = options_.activations});
}

absl::Status ModelRunner::Project(const float* x, const float* w, const NativeMatrix& native,
                                  const float* bias, float* y, int64_t num_rows, int64_t n) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  if (bias != nullptr) {  // y = bias broadcast to every row (a one-row table gathered at 0)
    PAGEDKV_RETURN_IF_ERROR(b.EmbeddingGather({.table = bias,
                                               .token_ids = zero_ids_.as<const int32_t>(),
                                               .out = y,
                                               .num_tokens = num_rows,
                                               .vocab_size = 1,
                                               .dim = n}));
  }
  return MatMul(
      {.x = x, .w = w, .y = y, .m = num_rows, .n = n, .k = c.dim, .accumulate = bias != nullptr},
      native);
}

}  // namespace pagedkv
