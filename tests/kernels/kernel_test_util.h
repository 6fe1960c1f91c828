// Copyright 2026 The pagedkv Authors.
//
// Helpers for the kernel tests: seeded random data and float64 references written plainly from
// the published formulas (Hugging Face transformers' modeling_rope_utils.py), independent of the
// PAGEDKV_HD code under test.
#ifndef PAGEDKV_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define PAGEDKV_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "pagedkv/rope_config.h"

namespace pagedkv::testing {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

// Hugging Face _compute_*_parameters, in float64. Returns inv_freq of every pair.
inline std::vector<double> ReferenceInvFreq(const RopeConfig& c) {
  const double pi = std::acos(-1.0);
  const int dim = c.rotary_dim == 0 ? c.head_dim : c.rotary_dim;
  auto default_inv = [&](double base) {
    std::vector<double> inv;
    for (int i = 0; i < dim; i += 2) inv.push_back(1.0 / std::pow(base, double(i) / dim));
    return inv;
  };
  switch (c.scaling) {
    case RopeScaling::kNone:
      return default_inv(c.base);
    case RopeScaling::kLinear: {
      std::vector<double> inv = default_inv(c.base);
      for (double& f : inv) f /= c.factor;
      return inv;
    }
    case RopeScaling::kNtk:
      return default_inv(c.base * std::pow(c.factor, double(dim) / (dim - 2)));
    case RopeScaling::kDynamicNtk: {
      const double max_pos = double(c.max_position_embeddings);
      const double seq_len =
          c.dynamic_seq_len > c.max_position_embeddings ? double(c.dynamic_seq_len) : max_pos;
      const double base = c.base * std::pow((c.factor * seq_len / max_pos) - (c.factor - 1),
                                            double(dim) / (dim - 2));
      return default_inv(base);
    }
    case RopeScaling::kYarn: {
      const double original = c.original_max_position_embeddings > 0
                                  ? double(c.original_max_position_embeddings)
                                  : double(c.max_position_embeddings);
      auto find_correction_dim = [&](double num_rotations) {
        return (dim * std::log(original / (num_rotations * 2 * pi))) / (2 * std::log(c.base));
      };
      double low = find_correction_dim(c.beta_fast);
      double high = find_correction_dim(c.beta_slow);
      if (c.yarn_truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, double(dim - 1));
      if (low == high) high += 0.001;
      std::vector<double> inv;
      for (int i = 0; i < dim / 2; ++i) {
        const double pos_freq = std::pow(c.base, double(2 * i) / dim);
        const double extrapolation = 1.0 / pos_freq;
        const double interpolation = 1.0 / (c.factor * pos_freq);
        const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        const double extrapolation_factor = 1.0 - ramp;
        inv.push_back(interpolation * (1 - extrapolation_factor) +
                      extrapolation * extrapolation_factor);
      }
      return inv;
    }
    case RopeScaling::kLlama3: {
      std::vector<double> inv = default_inv(c.base);
      const double old_context = double(c.original_max_position_embeddings);
      const double low_freq_wavelen = old_context / c.low_freq_factor;
      const double high_freq_wavelen = old_context / c.high_freq_factor;
      for (double& f : inv) {
        const double wavelen = 2 * pi / f;
        const double scaled = wavelen > low_freq_wavelen ? f / c.factor : f;
        const double smooth =
            (old_context / wavelen - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
        const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
        f = medium ? (1 - smooth) * scaled / c.factor + smooth * scaled : scaled;
      }
      return inv;
    }
  }
  return {};
}

// YaRN attention factor (1 for the other variants), float64.
inline double ReferenceAttentionFactor(const RopeConfig& c) {
  if (c.scaling != RopeScaling::kYarn) return 1.0;
  if (c.attention_factor > 0) return c.attention_factor;
  auto get_mscale = [](double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
  };
  if (c.yarn_mscale != 0 && c.yarn_mscale_all_dim != 0) {
    return get_mscale(c.factor, c.yarn_mscale) / get_mscale(c.factor, c.yarn_mscale_all_dim);
  }
  return get_mscale(c.factor, 1.0);
}

// Rotates one head (float64) to `position` with HF semantics: rotated dims multiplied by the
// attention factor, dims >= rotary_dim unchanged.
inline std::vector<double> ReferenceRotate(const RopeConfig& c, const std::vector<double>& inv,
                                           double attention_factor, int64_t position,
                                           const double* head) {
  const int dim = c.rotary_dim == 0 ? c.head_dim : c.rotary_dim;
  std::vector<double> out(head, head + c.head_dim);
  for (int i = 0; i < dim / 2; ++i) {
    const int a = c.layout == RopeLayout::kInterleaved ? 2 * i : i;
    const int b = c.layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + dim / 2;
    const double angle = double(position) * inv[i];
    const double cs = std::cos(angle) * attention_factor;
    const double sn = std::sin(angle) * attention_factor;
    out[a] = head[a] * cs - head[b] * sn;
    out[b] = head[a] * sn + head[b] * cs;
  }
  return out;
}

// A few configs covering every scaling variant and both layouts (head_dim 64 unless noted).
inline std::vector<RopeConfig> AllScalingConfigs() {
  std::vector<RopeConfig> configs;
  RopeConfig none;
  none.head_dim = 64;
  configs.push_back(none);
  RopeConfig interleaved = none;
  interleaved.layout = RopeLayout::kInterleaved;
  configs.push_back(interleaved);
  RopeConfig partial = none;
  partial.rotary_dim = 32;
  configs.push_back(partial);
  RopeConfig partial_interleaved = partial;
  partial_interleaved.layout = RopeLayout::kInterleaved;
  configs.push_back(partial_interleaved);
  RopeConfig linear = none;
  linear.scaling = RopeScaling::kLinear;
  linear.factor = 4.0;
  configs.push_back(linear);
  RopeConfig ntk = none;
  ntk.scaling = RopeScaling::kNtk;
  ntk.factor = 2.0;
  configs.push_back(ntk);
  RopeConfig dynamic = none;
  dynamic.scaling = RopeScaling::kDynamicNtk;
  dynamic.factor = 2.0;
  dynamic.max_position_embeddings = 2048;
  dynamic.dynamic_seq_len = 8192;
  configs.push_back(dynamic);
  RopeConfig yarn = none;
  yarn.scaling = RopeScaling::kYarn;
  yarn.factor = 4.0;
  yarn.max_position_embeddings = 16384;
  yarn.original_max_position_embeddings = 4096;
  configs.push_back(yarn);
  RopeConfig yarn_mscale = yarn;
  yarn_mscale.layout = RopeLayout::kInterleaved;
  yarn_mscale.yarn_mscale = 0.707;
  yarn_mscale.yarn_mscale_all_dim = 1.0;
  yarn_mscale.yarn_truncate = false;
  configs.push_back(yarn_mscale);
  RopeConfig llama3;
  llama3.head_dim = 128;
  llama3.base = 500000.0;
  llama3.scaling = RopeScaling::kLlama3;
  llama3.factor = 8.0;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  llama3.original_max_position_embeddings = 8192;
  llama3.max_position_embeddings = 131072;
  configs.push_back(llama3);
  return configs;
}

// Float64 attention (scale 1 / sqrt(hd)) of one query row over dense K / V rows of hd values.
inline std::vector<double> ReferenceDenseAttention(const float* q,
                                                   const std::vector<std::vector<float>>& k,
                                                   const std::vector<std::vector<float>>& v,
                                                   int32_t hd) {
  std::vector<double> scores(k.size());
  double max_score = -INFINITY, total = 0;
  for (size_t j = 0; j < k.size(); ++j) {
    double s = 0;
    for (int32_t d = 0; d < hd; ++d) s += double(q[d]) * k[j][d];
    scores[j] = s / std::sqrt(double(hd));
    max_score = std::max(max_score, scores[j]);
  }
  for (double& s : scores) total += (s = std::exp(s - max_score));
  std::vector<double> out(hd, 0.0);
  for (size_t j = 0; j < k.size(); ++j) {
    for (int32_t d = 0; d < hd; ++d) out[d] += scores[j] / total * v[j][d];
  }
  return out;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
