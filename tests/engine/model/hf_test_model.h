// Copyright 2026 The pagedkv Authors.
//
// Test-made Hugging Face model directories with random weights (config.json,
// generation_config.json, safetensors in F32 / F16 / BF16, one file or shards with
// model.safetensors.index.json), and a plain float64 reference forward pass written from the
// transformers formulas (RMSNorm, q/k/v (+ bias), half-split RoPE with each rope_scaling type,
// causal GQA attention (with per-layer sliding windows: HfTestSpec::layer_window), SwiGLU, tied
// or separate LM head).
//
// Weights are small dyadic fractions (k / 2^n, |k| < 128) so that F16 and BF16 hold them
// exactly: the reference uses the same values the file stores.
//
// Example:
//   HfTestSpec spec{.arch = "Qwen2ForCausalLM"};
//   HfTestModel m = MakeHfTestModel(spec, /*seed=*/3);
//   std::filesystem::path dir = m.Write("qwen2_case");
//   std::vector<std::vector<double>> want = m.Logits({1, 5, 9});  // [position][vocab]
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_HF_TEST_MODEL_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_HF_TEST_MODEL_H_

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/test_temp_dir.h"

namespace pagedkv::testing {

struct HfTestSpec {
  std::string arch = "LlamaForCausalLM";
  int dim = 32, hidden = 48, layers = 2, heads = 4, kv_heads = 2, vocab = 64, max_pos = 64;
  bool tie = false;
  std::string stored_tied = "lm_head.weight";  // with tie: the one of the two that is stored
  std::string dtype = "F32";                   // F32, F16 or BF16
  int shards = 1;                              // > 1: model.safetensors.index.json
  double theta = 10000.0;
  double eps = 1e-5;
  nlohmann::json rope_scaling = nullptr;  // as in config.json
  bool write_head_dim = false;            // also write "head_dim"
  int head_dim = 0;  // > 0: this head width (written as "head_dim"); 0: dim / heads
  // Per-layer sliding window of the reference (empty or 0: full causal attention; W > 0: the query
  // at i reads key j iff j <= i and i - j < W, transformers' sliding_window_overlay). The config
  // keys that select it go into config_patch.
  std::vector<int> layer_window = {};
  nlohmann::json config_patch = nullptr;  // merged into config.json last (JSON merge patch)
};

struct HfTestTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

inline uint16_t TestF16Bits(double x) {  // exact for the normal dyadic values used here
  if (x == 0.0) return 0;
  int e = 0;
  const double m = std::frexp(std::abs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
  const auto exponent = static_cast<uint16_t>(e - 1 + 15);
  const auto mantissa = static_cast<uint16_t>(std::lround((m * 2.0 - 1.0) * 1024.0));
  return static_cast<uint16_t>((x < 0 ? 0x8000 : 0) | (exponent << 10) | mantissa);
}

inline std::string EncodeValues(const std::vector<double>& v, const std::string& dtype) {
  std::string out;
  for (double x : v) {
    const auto f = static_cast<float>(x);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    if (dtype == "F32") {
      out.append(reinterpret_cast<const char*>(&bits), 4);
    } else {
      const uint16_t h = dtype == "BF16" ? static_cast<uint16_t>(bits >> 16) : TestF16Bits(x);
      out.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  return out;
}

// Bytes of a safetensors file holding `tensors` (names in map order), with metadata.
inline std::string SafetensorsBytes(const std::map<std::string, HfTestTensor>& tensors,
                                    const std::string& dtype) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& [name, t] : tensors) {
    const std::string bytes = EncodeValues(t.values, dtype);
    header[name] = {{"dtype", dtype},
                    {"shape", t.shape},
                    {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  }
  const std::string h = header.dump();
  const uint64_t n = h.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + h + data;
}

inline void WriteFile(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct HfTestModel {
  HfTestSpec spec;
  std::map<std::string, HfTestTensor> tensors;  // what the files store

  int head_dim() const { return spec.head_dim > 0 ? spec.head_dim : spec.dim / spec.heads; }
  const std::vector<double>& T(const std::string& name) const { return tensors.at(name).values; }
  std::string L(int l, const char* rest) const {
    return "model.layers." + std::to_string(l) + "." + rest;
  }

  nlohmann::json ConfigJson() const {
    nlohmann::json c = {{"architectures", {spec.arch}},
                        {"hidden_size", spec.dim},
                        {"intermediate_size", spec.hidden},
                        {"num_hidden_layers", spec.layers},
                        {"num_attention_heads", spec.heads},
                        {"num_key_value_heads", spec.kv_heads},
                        {"vocab_size", spec.vocab},
                        {"max_position_embeddings", spec.max_pos},
                        {"rms_norm_eps", spec.eps},
                        {"rope_theta", spec.theta},
                        {"tie_word_embeddings", spec.tie},
                        {"hidden_act", "silu"},
                        {"rope_scaling", spec.rope_scaling},
                        {"bos_token_id", 1},
                        {"eos_token_id", 2},
                        {"torch_dtype", "float32"}};
    if (spec.arch == "MistralForCausalLM") c["sliding_window"] = nullptr;
    if (spec.arch == "Qwen2ForCausalLM") c["use_sliding_window"] = false;
    if (spec.arch == "LlamaForCausalLM") c["attention_bias"] = false;
    if (spec.write_head_dim || spec.head_dim > 0) c["head_dim"] = head_dim();
    if (!spec.config_patch.is_null()) c.merge_patch(spec.config_patch);
    return c;
  }

  // Writes the directory under the temp dir and returns it.
  std::filesystem::path Write(const std::string& name) const {
    const auto dir = TestTempDir() / ("hf_" + name);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    WriteFile(dir / "config.json", ConfigJson().dump(2));
    WriteFile(dir / "generation_config.json", R"({"eos_token_id": [2, 3]})");
    if (spec.shards <= 1) {
      WriteFile(dir / "model.safetensors", SafetensorsBytes(tensors, spec.dtype));
      return dir;
    }
    std::vector<std::map<std::string, HfTestTensor>> parts(static_cast<size_t>(spec.shards));
    nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                            {"weight_map", nlohmann::json::object()}};
    size_t i = 0;
    for (const auto& [tname, t] : tensors) {
      const size_t s = i++ % parts.size();
      parts[s][tname] = t;
      char file[64];
      std::snprintf(file, sizeof(file), "model-%05zu-of-%05d.safetensors", s + 1, spec.shards);
      index["weight_map"][tname] = file;
    }
    for (size_t s = 0; s < parts.size(); ++s) {
      char file[64];
      std::snprintf(file, sizeof(file), "model-%05zu-of-%05d.safetensors", s + 1, spec.shards);
      WriteFile(dir / file, SafetensorsBytes(parts[s], spec.dtype));
    }
    WriteFile(dir / "model.safetensors.index.json", index.dump(2));
    return dir;
  }

  // ---- float64 reference (transformers' LlamaModel / Qwen2Model, written plainly) ----

  std::vector<double> InvFreq() const {
    const int d = head_dim();
    std::vector<double> inv(static_cast<size_t>(d / 2));
    for (int i = 0; i < d / 2; ++i)
      inv[static_cast<size_t>(i)] = 1.0 / std::pow(spec.theta, 2.0 * i / d);
    if (spec.rope_scaling.is_null()) return inv;
    const std::string type =
        spec.rope_scaling.value("rope_type", spec.rope_scaling.value("type", ""));
    const double factor = spec.rope_scaling.value("factor", 1.0);
    if (type == "linear") {
      for (double& f : inv) f /= factor;
    } else if (type == "llama3") {
      const double orig = spec.rope_scaling["original_max_position_embeddings"].get<double>();
      const double lo = spec.rope_scaling["low_freq_factor"].get<double>();
      const double hi = spec.rope_scaling["high_freq_factor"].get<double>();
      for (double& f : inv) {
        const double wavelen = 2 * M_PI / f;
        if (wavelen > orig / lo) {
          f /= factor;
        } else if (wavelen >= orig / hi) {
          const double smooth = (orig / wavelen - lo) / (hi - lo);
          f = (1 - smooth) * f / factor + smooth * f;
        }
      }
    } else if (type == "yarn") {
      YarnInvFreq(&inv);
    }
    return inv;  // "dynamic": InvFreqForLength
  }

  // The frequencies a forward call over a sequence of `length` tokens uses: InvFreq(), except
  // that "dynamic" recomputes the base when length passes max_position_embeddings
  // (transformers' _compute_dynamic_ntk_parameters with seq_len = max(position_ids) + 1).
  std::vector<double> InvFreqForLength(int64_t length) const {
    if (spec.rope_scaling.is_null() ||
        spec.rope_scaling.value("rope_type", spec.rope_scaling.value("type", "")) != "dynamic" ||
        length <= spec.max_pos) {
      return InvFreq();
    }
    const double factor = spec.rope_scaling.value("factor", 1.0);
    const int d = head_dim();
    const double base =
        spec.theta * std::pow(factor * static_cast<double>(length) / spec.max_pos - (factor - 1),
                              static_cast<double>(d) / (d - 2));
    std::vector<double> inv(static_cast<size_t>(d / 2));
    for (int i = 0; i < d / 2; ++i) inv[static_cast<size_t>(i)] = 1.0 / std::pow(base, 2.0 * i / d);
    return inv;
  }

  void YarnInvFreq(std::vector<double>* inv) const {
    const int d = head_dim();
    const double orig = spec.rope_scaling["original_max_position_embeddings"].get<double>();
    const double factor = spec.max_pos / orig;
    auto corr = [&](double rot) {
      return d * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(spec.theta));
    };
    const double low = std::max(std::floor(corr(32.0)), 0.0);
    double high = std::min(std::ceil(corr(1.0)), d - 1.0);
    if (low == high) high += 0.001;
    for (int i = 0; i < d / 2; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;
      const double base = 1.0 / std::pow(spec.theta, 2.0 * i / d);
      (*inv)[static_cast<size_t>(i)] = base / factor * (1 - extrapolation) + base * extrapolation;
    }
  }

  double AttentionScaling() const {
    if (spec.rope_scaling.is_null() || spec.rope_scaling.value("rope_type", "") != "yarn")
      return 1.0;
    const double factor =
        spec.max_pos / spec.rope_scaling["original_max_position_embeddings"].get<double>();
    return factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1.0;
  }

  std::vector<double> RmsNorm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + spec.eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
    return y;
  }

  // y = W x (+ b); W is [out, in].
  static std::vector<double> MatVec(const std::vector<double>& w, const std::vector<double>& x,
                                    size_t out, const std::vector<double>* b = nullptr) {
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < x.size(); ++i) y[o] += w[o * x.size() + i] * x[i];
      if (b != nullptr) y[o] += (*b)[o];
    }
    return y;
  }

  // rotate_half RoPE of every head of v ([n_heads * head_dim]) at `pos`, in a forward call over
  // `length` tokens.
  void Rope(std::vector<double>* v, int pos, int64_t length) const {
    const int d = head_dim();
    const std::vector<double> inv = InvFreqForLength(length);
    const double s = AttentionScaling();
    for (size_t h = 0; h < v->size() / static_cast<size_t>(d); ++h) {
      for (int i = 0; i < d / 2; ++i) {
        double& a = (*v)[h * d + i];
        double& b = (*v)[h * d + i + d / 2];
        const double c = std::cos(pos * inv[static_cast<size_t>(i)]) * s;
        const double sn = std::sin(pos * inv[static_cast<size_t>(i)]) * s;
        const double x = a, y = b;
        a = x * c - y * sn;
        b = y * c + x * sn;
      }
    }
  }

  std::vector<double> Embedding() const {
    return spec.tie ? T(spec.stored_tied) : T("model.embed_tokens.weight");
  }

  // Whether layer l's query at position i reads the key at j <= i (the sliding-window mask).
  bool Visible(int l, size_t i, size_t j) const {
    const int w = spec.layer_window.empty() ? 0 : spec.layer_window[static_cast<size_t>(l)];
    return w <= 0 || i - j < static_cast<size_t>(w);
  }

  // Logits at every position of `tokens`: [position][vocab]. The tokens run in forward calls that
  // end (exclusive) at `step_ends` (ascending, the last = tokens.size()); empty: one call. Each
  // call rotates its queries and keys for its own end (only "dynamic" scaling cares), and keys
  // keep the rotation of the call that computed them, as with transformers' KV cache.
  std::vector<std::vector<double>> Logits(const std::vector<int>& tokens,
                                          std::vector<size_t> step_ends = {}) const;
};

inline std::vector<std::vector<double>> HfTestModel::Logits(const std::vector<int>& tokens,
                                                            std::vector<size_t> step_ends) const {
  const size_t D = static_cast<size_t>(spec.dim), hd = static_cast<size_t>(head_dim());
  const size_t kv = static_cast<size_t>(spec.kv_heads) * hd, n = tokens.size();
  const size_t Q = static_cast<size_t>(spec.heads) * hd;
  if (step_ends.empty()) step_ends.push_back(n);
  std::vector<int64_t> length(n);  // the end of each token's forward call
  for (size_t t = 0, s = 0; t < n; ++t) {
    while (step_ends[s] <= t) ++s;
    length[t] = static_cast<int64_t>(step_ends[s]);
  }
  const std::vector<double> emb = Embedding();
  std::vector<std::vector<double>> x(n);
  for (size_t t = 0; t < n; ++t) {
    x[t].assign(emb.begin() + static_cast<long>(tokens[t] * D),
                emb.begin() + static_cast<long>((tokens[t] + 1) * D));
  }
  const bool bias = spec.arch == "Qwen2ForCausalLM";
  for (int l = 0; l < spec.layers; ++l) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      const std::vector<double> h = RmsNorm(x[t], T(L(l, "input_layernorm.weight")));
      q[t] = MatVec(T(L(l, "self_attn.q_proj.weight")), h, Q,
                    bias ? &T(L(l, "self_attn.q_proj.bias")) : nullptr);
      k[t] = MatVec(T(L(l, "self_attn.k_proj.weight")), h, kv,
                    bias ? &T(L(l, "self_attn.k_proj.bias")) : nullptr);
      v[t] = MatVec(T(L(l, "self_attn.v_proj.weight")), h, kv,
                    bias ? &T(L(l, "self_attn.v_proj.bias")) : nullptr);
      Rope(&q[t], static_cast<int>(t), length[t]);
      Rope(&k[t], static_cast<int>(t), length[t]);
    }
    for (size_t t = 0; t < n; ++t) {
      std::vector<double> att(Q, 0.0);
      for (size_t h = 0; h < static_cast<size_t>(spec.heads); ++h) {
        const size_t g = h / static_cast<size_t>(spec.heads / spec.kv_heads);
        std::vector<double> score(t + 1);
        double mx = -1e300, sum = 0;
        for (size_t s = 0; s <= t; ++s) {
          if (!Visible(l, t, s)) {
            score[s] = -INFINITY;
            continue;
          }
          double dot = 0;
          for (size_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[s][g * hd + i];
          score[s] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, score[s]);
        }
        for (double& sc : score) sum += (sc = std::exp(sc - mx));
        for (size_t s = 0; s <= t; ++s) {
          for (size_t i = 0; i < hd; ++i) att[h * hd + i] += score[s] / sum * v[s][g * hd + i];
        }
      }
      const std::vector<double> o = MatVec(T(L(l, "self_attn.o_proj.weight")), att, D);
      for (size_t i = 0; i < D; ++i) x[t][i] += o[i];
      const std::vector<double> h = RmsNorm(x[t], T(L(l, "post_attention_layernorm.weight")));
      const size_t H = static_cast<size_t>(spec.hidden);
      std::vector<double> gate = MatVec(T(L(l, "mlp.gate_proj.weight")), h, H);
      const std::vector<double> up = MatVec(T(L(l, "mlp.up_proj.weight")), h, H);
      for (size_t i = 0; i < H; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const std::vector<double> down = MatVec(T(L(l, "mlp.down_proj.weight")), gate, D);
      for (size_t i = 0; i < D; ++i) x[t][i] += down[i];
    }
  }
  const std::vector<double> head = spec.tie ? emb : T("lm_head.weight");
  std::vector<std::vector<double>> logits(n);
  for (size_t t = 0; t < n; ++t) {
    logits[t] =
        MatVec(head, RmsNorm(x[t], T("model.norm.weight")), static_cast<size_t>(spec.vocab));
  }
  return logits;
}

// Random weights for `spec` (dyadic values, exact in F16 and BF16).
inline HfTestModel MakeHfTestModel(const HfTestSpec& spec, uint32_t seed) {
  HfTestModel m{.spec = spec, .tensors = {}};
  std::mt19937 rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double step, double offset) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    HfTestTensor t{.shape = shape, .values = {}};
    for (int64_t i = 0; i < n; ++i) {
      t.values.push_back(offset + step * (static_cast<int>(rng() % 127) - 63));
    }
    m.tensors[name] = std::move(t);
  };
  const int64_t D = spec.dim, H = spec.hidden, Q = int64_t{spec.heads} * m.head_dim(),
                KV = int64_t{spec.kv_heads} * m.head_dim();
  const int64_t V = spec.vocab;
  if (!spec.tie || spec.stored_tied == "model.embed_tokens.weight")
    add("model.embed_tokens.weight", {V, D}, 1.0 / 64, 0);
  if (!spec.tie || spec.stored_tied == "lm_head.weight") add("lm_head.weight", {V, D}, 1.0 / 64, 0);
  add("model.norm.weight", {D}, 1.0 / 128, 1.0);
  for (int l = 0; l < spec.layers; ++l) {
    add(m.L(l, "input_layernorm.weight"), {D}, 1.0 / 128, 1.0);
    add(m.L(l, "post_attention_layernorm.weight"), {D}, 1.0 / 128, 1.0);
    add(m.L(l, "self_attn.q_proj.weight"), {Q, D}, 1.0 / 512, 0);
    add(m.L(l, "self_attn.k_proj.weight"), {KV, D}, 1.0 / 512, 0);
    add(m.L(l, "self_attn.v_proj.weight"), {KV, D}, 1.0 / 512, 0);
    add(m.L(l, "self_attn.o_proj.weight"), {D, Q}, 1.0 / 512, 0);
    add(m.L(l, "mlp.gate_proj.weight"), {H, D}, 1.0 / 512, 0);
    add(m.L(l, "mlp.up_proj.weight"), {H, D}, 1.0 / 512, 0);
    add(m.L(l, "mlp.down_proj.weight"), {D, H}, 1.0 / 512, 0);
    if (spec.arch == "Qwen2ForCausalLM") {
      add(m.L(l, "self_attn.q_proj.bias"), {Q}, 1.0 / 128, 0);
      add(m.L(l, "self_attn.k_proj.bias"), {KV}, 1.0 / 128, 0);
      add(m.L(l, "self_attn.v_proj.bias"), {KV}, 1.0 / 128, 0);
    }
  }
  return m;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_HF_TEST_MODEL_H_
