// Copyright 2026 The pagedkv Authors.
//
// The floor for engine benchmarks: a plain single-sequence llama2.c forward pass (run.c's
// structure) with a contiguous KV cache, no paging, no scheduler, no batching, one thread. Its
// matmuls, norms and SwiGLU are the CPU kernels as they were before issue #16 (plain_ops.h, frozen:
// SSE2, no threads), so the floor stays fixed while the engine's kernels get faster.
//
// Example:
//   PlainLlama plain(weights);
//   TokenId token = 1;
//   for (int pos = 0; pos < n; ++pos) token = plain.Argmax(plain.Forward(token, pos));
#ifndef PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_LLAMA_H_
#define PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_LLAMA_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bench/engine/model/plain_ops.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/types.h"

namespace pagedkv::bench {

class PlainLlama {
 public:
  explicit PlainLlama(const ModelWeights& w) : w_(w), c_(w.config()) {
    const size_t d = static_cast<size_t>(c_.dim), kv = static_cast<size_t>(c_.kv_dim()),
                 h = static_cast<size_t>(c_.hidden_dim);
    x_.resize(d);
    xb_.resize(d);
    q_.resize(d);
    k_.resize(kv);
    v_.resize(kv);
    att_out_.resize(d);
    hb_.resize(h);
    hb2_.resize(h);
    scores_.resize(static_cast<size_t>(c_.seq_len));
    logits_.resize(static_cast<size_t>(c_.vocab_size));
    key_cache_.resize(static_cast<size_t>(c_.n_layers) * c_.seq_len * kv);
    value_cache_.resize(key_cache_.size());
    const int half = c_.head_dim() / 2;
    cos_sin_.resize(static_cast<size_t>(c_.seq_len) * half * 2);
    for (int pos = 0; pos < c_.seq_len; ++pos) {
      for (int i = 0; i < half; ++i) {
        const double angle =
            pos * std::pow(static_cast<double>(c_.rope_base), -2.0 * i / c_.head_dim());
        cos_sin_[(static_cast<size_t>(pos) * half + i) * 2] = static_cast<float>(std::cos(angle));
        cos_sin_[(static_cast<size_t>(pos) * half + i) * 2 + 1] =
            static_cast<float>(std::sin(angle));
      }
    }
  }

  // Logits [vocab_size] after `token` at `pos` (0 <= pos < seq_len, called in order).
  const std::vector<float>& Forward(TokenId token, int pos) {
    const int d = c_.dim, kvd = c_.kv_dim(), hd = c_.head_dim(), hid = c_.hidden_dim;
    const int group = c_.n_heads / c_.n_kv_heads;
    std::copy_n(w_.token_embedding() + static_cast<int64_t>(token) * d, d, x_.data());
    for (int l = 0; l < c_.n_layers; ++l) {
      const LayerWeights& lw = w_.layer(l);
      plain::RmsNorm(x_.data(), lw.rms_att, xb_.data(), d, c_.rms_norm_eps);
      plain::Linear(xb_.data(), lw.wq, q_.data(), 1, d, d, false);
      plain::Linear(xb_.data(), lw.wk, k_.data(), 1, kvd, d, false);
      plain::Linear(xb_.data(), lw.wv, v_.data(), 1, kvd, d, false);
      Rotate(q_.data(), d, hd, pos);
      Rotate(k_.data(), kvd, hd, pos);
      float* kc = key_cache_.data() + (static_cast<size_t>(l) * c_.seq_len) * kvd;
      float* vc = value_cache_.data() + (static_cast<size_t>(l) * c_.seq_len) * kvd;
      std::copy(k_.begin(), k_.end(), kc + static_cast<size_t>(pos) * kvd);
      std::copy(v_.begin(), v_.end(), vc + static_cast<size_t>(pos) * kvd);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (int h = 0; h < c_.n_heads; ++h) {
        const float* q = q_.data() + h * hd;
        const int kv_head = h / group;
        float max_score = -INFINITY;
        for (int t = 0; t <= pos; ++t) {
          const float* k = kc + static_cast<size_t>(t) * kvd + kv_head * hd;
          float s = 0.0f;
          for (int i = 0; i < hd; ++i) s += q[i] * k[i];
          scores_[static_cast<size_t>(t)] = s * scale;
          max_score = std::max(max_score, s * scale);
        }
        float sum = 0.0f;
        for (int t = 0; t <= pos; ++t) {
          scores_[static_cast<size_t>(t)] = std::exp(scores_[static_cast<size_t>(t)] - max_score);
          sum += scores_[static_cast<size_t>(t)];
        }
        float* out = att_out_.data() + h * hd;
        std::fill(out, out + hd, 0.0f);
        for (int t = 0; t <= pos; ++t) {
          const float a = scores_[static_cast<size_t>(t)] / sum;
          const float* v = vc + static_cast<size_t>(t) * kvd + kv_head * hd;
          for (int i = 0; i < hd; ++i) out[i] += a * v[i];
        }
      }
      plain::Linear(att_out_.data(), lw.wo, x_.data(), 1, d, d, true);
      plain::RmsNorm(x_.data(), lw.rms_ffn, xb_.data(), d, c_.rms_norm_eps);
      plain::Linear(xb_.data(), lw.w1, hb_.data(), 1, hid, d, false);
      plain::Linear(xb_.data(), lw.w3, hb2_.data(), 1, hid, d, false);
      plain::SwiGlu(hb_.data(), hb2_.data(), hb_.data(), hid);
      plain::Linear(hb_.data(), lw.w2, x_.data(), 1, d, hid, true);
    }
    plain::RmsNorm(x_.data(), w_.rms_final(), x_.data(), d, c_.rms_norm_eps);
    plain::Linear(x_.data(), w_.classifier(), logits_.data(), 1, c_.vocab_size, d, false);
    return logits_;
  }

  static TokenId Argmax(const std::vector<float>& logits) {
    return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }

 private:
  // RoPE over `n` values (heads of size hd): interleaved pairs, as run.c does, or half-split
  // pairs (i, i + hd/2) for a Hugging Face model (config.rope, unscaled).
  void Rotate(float* v, int n, int hd, int pos) const {
    const int half = hd / 2;
    if (c_.rope.has_value() && c_.rope->layout == RopeLayout::kHalfSplit) {
      for (int h = 0; h < n / hd; ++h) {
        for (int pair = 0; pair < half; ++pair) {
          const float c = cos_sin_[(static_cast<size_t>(pos) * half + pair) * 2];
          const float s = cos_sin_[(static_cast<size_t>(pos) * half + pair) * 2 + 1];
          float* a = v + h * hd + pair;
          float* b = a + half;
          const float x = *a, y = *b;
          *a = x * c - y * s;
          *b = x * s + y * c;
        }
      }
      return;
    }
    for (int i = 0; i < n; i += 2) {
      const int pair = (i % hd) / 2;
      const float c = cos_sin_[(static_cast<size_t>(pos) * half + pair) * 2];
      const float s = cos_sin_[(static_cast<size_t>(pos) * half + pair) * 2 + 1];
      const float a = v[i], b = v[i + 1];
      v[i] = a * c - b * s;
      v[i + 1] = a * s + b * c;
    }
  }

  const ModelWeights& w_;
  const ModelConfig c_;
  std::vector<float> x_, xb_, q_, k_, v_, att_out_, hb_, hb2_, scores_, logits_;
  std::vector<float> key_cache_, value_cache_, cos_sin_;
};

}  // namespace pagedkv::bench

#endif  // PAGEDKV_BENCH_ENGINE_MODEL_PLAIN_LLAMA_H_
