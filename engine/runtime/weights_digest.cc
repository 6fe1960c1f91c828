// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/weights_digest.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pagedkv/kernels/quant_blocks.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pagedkv {
namespace {

constexpr int64_t kSamples = 16;
constexpr int64_t kSampleBytes = 64;

void HashBytes(XXH3_state_t* state, const void* data, int64_t bytes) {
  if (data == nullptr || bytes <= 0) return;
  XXH3_64bits_update(state, data, static_cast<size_t>(bytes));
}

// 16 evenly spaced 64-byte samples of `bytes` bytes at `data` (all of it when shorter).
void HashSamples(XXH3_state_t* state, const void* data, int64_t bytes) {
  if (data == nullptr || bytes <= 0) return;
  const auto* p = static_cast<const unsigned char*>(data);
  if (bytes <= kSamples * kSampleBytes) return HashBytes(state, p, bytes);
  const int64_t stride = (bytes - kSampleBytes) / (kSamples - 1);
  for (int64_t i = 0; i < kSamples; ++i) HashBytes(state, p + i * stride, kSampleBytes);
}

// A [rows, cols] projection: its float matrix, or its block-format rows.
void HashMatrix(XXH3_state_t* state, const float* f32, const NativeMatrix& native, int64_t rows,
                int64_t cols) {
  if (native.data != nullptr) {
    return HashSamples(state, native.data, rows * WeightRowBytes(native.type, cols));
  }
  HashSamples(state, f32, rows * cols * int64_t{sizeof(float)});
}

}  // namespace

uint64_t WeightsDigest(const ModelWeights& weights) {
  const ModelConfig& c = weights.config();
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  const int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), hidden = c.hidden_dim;
  const int64_t norm_bytes = dim * int64_t{sizeof(float)};
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights.layer(l);
    HashBytes(&state, w.rms_att, norm_bytes);
    HashBytes(&state, w.rms_ffn, norm_bytes);
    HashMatrix(&state, w.wq, w.native_wq, q, dim);
    HashMatrix(&state, w.wk, w.native_wk, kv, dim);
    HashMatrix(&state, w.wv, w.native_wv, kv, dim);
    HashMatrix(&state, w.wo, w.native_wo, dim, q);
    HashMatrix(&state, w.w1, w.native_w1, hidden, dim);
    HashMatrix(&state, w.w2, w.native_w2, dim, hidden);
    HashMatrix(&state, w.w3, w.native_w3, hidden, dim);
    HashBytes(&state, w.bk, kv * int64_t{sizeof(float)});
  }
  HashBytes(&state, weights.rms_final(), norm_bytes);
  HashMatrix(&state, weights.token_embedding(), weights.native_token_embedding(), c.vocab_size,
             dim);
  return XXH3_64bits_digest(&state);
}

}  // namespace pagedkv
