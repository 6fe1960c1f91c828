// Copyright 2026 The pagedkv Authors.
//
// Test helpers: a tiny random-weights llama2.c model written by the test itself (independently of
// the library's loader), and a plain contiguous-KV reference forward pass in float64.
//
// Example:
//   TinyLlama2c model = MakeTinyLlama2c({.dim = 32, ...}, /*seed=*/7);
//   std::filesystem::path path = WriteTempFile("tiny.bin", model.FileBytes());
//   ReferenceForward ref(model);
//   std::vector<std::vector<double>> logits = ref.Logits({1, 5, 9});  // one row per position
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_TINY_LLAMA2C_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_TINY_LLAMA2C_H_

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/test_temp_dir.h"

namespace pagedkv::testing {

// The llama2.c header fields, as the test writes them.
struct TinyShape {
  int32_t dim = 32;
  int32_t hidden_dim = 48;
  int32_t n_layers = 2;
  int32_t n_heads = 4;
  int32_t n_kv_heads = 2;
  int32_t vocab_size = 64;
  int32_t seq_len = 64;
  bool shared_classifier = true;
};

// A model's tensors, each a flat row-major vector, in llama2.c's file order.
struct TinyLlama2c {
  TinyShape shape;
  std::vector<float> token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final,
      freq_cis_real, freq_cis_imag, wcls;

  int head_dim() const { return shape.dim / shape.n_heads; }
  int kv_dim() const { return shape.n_kv_heads * head_dim(); }

  // The whole llama2.c v0 file: 7 int32 then every tensor.
  std::string FileBytes() const {
    std::string out;
    const int32_t header[7] = {
        shape.dim,        shape.hidden_dim,
        shape.n_layers,   shape.n_heads,
        shape.n_kv_heads, shape.shared_classifier ? shape.vocab_size : -shape.vocab_size,
        shape.seq_len};
    out.append(reinterpret_cast<const char*>(header), sizeof(header));
    for (const std::vector<float>* t :
         {&token_embedding, &rms_att, &wq, &wk, &wv, &wo, &rms_ffn, &w1, &w2, &w3, &rms_final,
          &freq_cis_real, &freq_cis_imag}) {
      out.append(reinterpret_cast<const char*>(t->data()), t->size() * sizeof(float));
    }
    if (!shape.shared_classifier) {
      out.append(reinterpret_cast<const char*>(wcls.data()), wcls.size() * sizeof(float));
    }
    return out;
  }
  const std::vector<float>& classifier() const {
    return shape.shared_classifier ? token_embedding : wcls;
  }
};

inline TinyLlama2c MakeTinyLlama2c(const TinyShape& shape, uint32_t seed) {
  TinyLlama2c m;
  m.shape = shape;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, size_t n, float scale, float offset) {
    v.resize(n);
    for (float& x : v) x = offset + scale * uni(rng);
  };
  const size_t d = static_cast<size_t>(shape.dim), h = static_cast<size_t>(shape.hidden_dim),
               l = static_cast<size_t>(shape.n_layers), v = static_cast<size_t>(shape.vocab_size),
               kv = static_cast<size_t>(m.kv_dim());
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  const float sh = 1.0f / std::sqrt(static_cast<float>(h));
  fill(m.token_embedding, v * d, 1.0f, 0.0f);
  fill(m.rms_att, l * d, 0.2f, 1.0f);
  fill(m.wq, l * d * d, 2.0f * sd, 0.0f);
  fill(m.wk, l * kv * d, 2.0f * sd, 0.0f);
  fill(m.wv, l * kv * d, sd, 0.0f);
  fill(m.wo, l * d * d, sd, 0.0f);
  fill(m.rms_ffn, l * d, 0.2f, 1.0f);
  fill(m.w1, l * h * d, sd, 0.0f);
  fill(m.w2, l * d * h, sh, 0.0f);
  fill(m.w3, l * h * d, sd, 0.0f);
  fill(m.rms_final, d, 0.2f, 1.0f);
  // freq_cis: garbage on purpose, the runner must compute RoPE, not read these tables.
  fill(m.freq_cis_real, static_cast<size_t>(shape.seq_len) * m.head_dim() / 2, 1.0f, 0.0f);
  fill(m.freq_cis_imag, static_cast<size_t>(shape.seq_len) * m.head_dim() / 2, 1.0f, 0.0f);
  if (!shape.shared_classifier) fill(m.wcls, v * d, 1.0f, 0.0f);
  return m;
}

// Writes `bytes` to a fresh file under the test temp dir and returns its path.
inline std::filesystem::path WriteTempFile(const std::string& name, const std::string& bytes) {
  const std::filesystem::path path = TestTempDir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// llama2.c's forward pass in float64 with a contiguous KV cache: one token at a time,
// interleaved-pair RoPE with base 10000, GQA, SwiGLU, RMSNorm eps 1e-5.
class ReferenceForward {
 public:
  explicit ReferenceForward(const TinyLlama2c& m) : m_(m) {}

  // Logits after each token of `tokens` (row t predicts token t+1), starting from position 0.
  std::vector<std::vector<double>> Logits(const std::vector<int32_t>& tokens) {
    const TinyShape& s = m_.shape;
    const int d = s.dim, hd = m_.head_dim(), kvd = m_.kv_dim(), hid = s.hidden_dim;
    const int group = s.n_heads / s.n_kv_heads;
    std::vector<std::vector<std::vector<double>>> kcache(static_cast<size_t>(s.n_layers)),
        vcache(static_cast<size_t>(s.n_layers));
    std::vector<std::vector<double>> out;
    for (size_t pos = 0; pos < tokens.size(); ++pos) {
      std::vector<double> x(m_.token_embedding.begin() + tokens[pos] * d,
                            m_.token_embedding.begin() + (tokens[pos] + 1) * d);
      for (int l = 0; l < s.n_layers; ++l) {
        std::vector<double> xb = RmsNorm(x, &m_.rms_att[static_cast<size_t>(l * d)]);
        std::vector<double> q = MatVec(&m_.wq[static_cast<size_t>(l) * d * d], xb, d, d);
        std::vector<double> k = MatVec(&m_.wk[static_cast<size_t>(l) * kvd * d], xb, kvd, d);
        std::vector<double> v = MatVec(&m_.wv[static_cast<size_t>(l) * kvd * d], xb, kvd, d);
        Rope(q, hd, static_cast<int>(pos));
        Rope(k, hd, static_cast<int>(pos));
        kcache[static_cast<size_t>(l)].push_back(k);
        vcache[static_cast<size_t>(l)].push_back(v);
        std::vector<double> att_out(static_cast<size_t>(d), 0.0);
        for (int h = 0; h < s.n_heads; ++h) {
          const int kvh = h / group;
          std::vector<double> scores(pos + 1);
          double mx = -1e300;
          for (size_t t = 0; t <= pos; ++t) {
            double dot = 0;
            for (int i = 0; i < hd; ++i) {
              dot += q[static_cast<size_t>(h * hd + i)] *
                     kcache[static_cast<size_t>(l)][t][static_cast<size_t>(kvh * hd + i)];
            }
            scores[t] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, scores[t]);
          }
          double sum = 0;
          for (double& sc : scores) sum += (sc = std::exp(sc - mx));
          for (size_t t = 0; t <= pos; ++t) {
            for (int i = 0; i < hd; ++i) {
              att_out[static_cast<size_t>(h * hd + i)] +=
                  scores[t] / sum *
                  vcache[static_cast<size_t>(l)][t][static_cast<size_t>(kvh * hd + i)];
            }
          }
        }
        std::vector<double> o = MatVec(&m_.wo[static_cast<size_t>(l) * d * d], att_out, d, d);
        for (int i = 0; i < d; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
        xb = RmsNorm(x, &m_.rms_ffn[static_cast<size_t>(l * d)]);
        std::vector<double> g = MatVec(&m_.w1[static_cast<size_t>(l) * hid * d], xb, hid, d);
        std::vector<double> u = MatVec(&m_.w3[static_cast<size_t>(l) * hid * d], xb, hid, d);
        for (int i = 0; i < hid; ++i) {
          const double a = g[static_cast<size_t>(i)];
          g[static_cast<size_t>(i)] = a / (1.0 + std::exp(-a)) * u[static_cast<size_t>(i)];
        }
        std::vector<double> down = MatVec(&m_.w2[static_cast<size_t>(l) * d * hid], g, d, hid);
        for (int i = 0; i < d; ++i) x[static_cast<size_t>(i)] += down[static_cast<size_t>(i)];
      }
      x = RmsNorm(x, m_.rms_final.data());
      out.push_back(MatVec(m_.classifier().data(), x, s.vocab_size, d));
    }
    return out;
  }

 private:
  static std::vector<double> RmsNorm(const std::vector<double>& x, const float* w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = w[i] * x[i] * inv;
    return out;
  }
  static std::vector<double> MatVec(const float* w, const std::vector<double>& x, int rows,
                                    int cols) {
    std::vector<double> out(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      double acc = 0;
      for (int c = 0; c < cols; ++c) {
        acc +=
            static_cast<double>(w[static_cast<size_t>(r) * cols + c]) * x[static_cast<size_t>(c)];
      }
      out[static_cast<size_t>(r)] = acc;
    }
    return out;
  }
  static void Rope(std::vector<double>& v, int hd, int pos) {
    for (size_t i = 0; i < v.size(); i += 2) {
      const int pair = static_cast<int>(i % static_cast<size_t>(hd)) / 2;
      const double angle = pos * std::pow(10000.0, -2.0 * pair / hd);
      const double c = std::cos(angle), s = std::sin(angle);
      const double a = v[i], b = v[i + 1];
      v[i] = a * c - b * s;
      v[i + 1] = a * s + b * c;
    }
  }

  const TinyLlama2c& m_;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_TINY_LLAMA2C_H_
