// Copyright 2026 The pagedkv Authors.
//
// RoPE math shared by the CPU reference and the CUDA kernels: inverse frequencies for every
// scaling variant (formulas of Hugging Face transformers' modeling_rope_utils.py, in float64), the
// YaRN attention factor, cos/sin of a position, the pair layout, and the pair rotation itself.
//
// Example:
//   double inv = pagedkv::RopeInvFreq(config, /*pair=*/3);
//   float c, s;
//   pagedkv::RopeCosSin(/*position=*/42, inv, &c, &s);
//   int32_t a, b;
//   pagedkv::RopePairDims(config.layout, rotary_dim, 3, &a, &b);
//   pagedkv::RotatePair(&x[a], &x[b], c, s);
#ifndef PAGEDKV_KERNELS_ROPE_MATH_H_
#define PAGEDKV_KERNELS_ROPE_MATH_H_

#include <math.h>

#include <cstdint>

#include "pagedkv/hd.h"
#include "pagedkv/rope_config.h"

namespace pagedkv {

inline constexpr double kRopePi = 3.14159265358979323846;

// Rotary dim of `config` (head_dim when rotary_dim is 0).
PAGEDKV_HD int32_t RopeRotaryDim(const RopeConfig& config) {
  return config.rotary_dim == 0 ? config.head_dim : config.rotary_dim;
}

// Unscaled inverse frequency of pair i: 1 / base^(2i / dim).
PAGEDKV_HD double RopeDefaultInvFreq(double base, int32_t dim, int32_t pair) {
  return 1.0 / pow(base, static_cast<double>(2 * pair) / static_cast<double>(dim));
}

// YaRN find_correction_dim: the dim index whose wavelength makes `num_rotations` turns over
// `max_position_embeddings`.
PAGEDKV_HD double YarnCorrectionDim(double num_rotations, int32_t dim, double base,
                                    double max_position_embeddings) {
  return (dim * log(max_position_embeddings / (num_rotations * 2.0 * kRopePi))) / (2.0 * log(base));
}

// YaRN find_correction_range: [low, high] dims of the ramp.
PAGEDKV_HD void YarnCorrectionRange(const RopeConfig& config, double* low, double* high) {
  const int32_t dim = RopeRotaryDim(config);
  const double original = config.original_max_position_embeddings > 0
                              ? static_cast<double>(config.original_max_position_embeddings)
                              : static_cast<double>(config.max_position_embeddings);
  double lo = YarnCorrectionDim(config.beta_fast, dim, config.base, original);
  double hi = YarnCorrectionDim(config.beta_slow, dim, config.base, original);
  if (config.yarn_truncate) {
    lo = floor(lo);
    hi = ceil(hi);
  }
  *low = lo > 0.0 ? lo : 0.0;
  *high = hi < dim - 1 ? hi : static_cast<double>(dim - 1);
}

// YaRN get_mscale.
PAGEDKV_HD double YarnGetMscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

// Factor multiplying cos and sin (so both q and k): YaRN's attention factor, 1 otherwise.
PAGEDKV_HD double RopeAttentionFactor(const RopeConfig& config) {
  if (config.scaling != RopeScaling::kYarn) return 1.0;
  if (config.attention_factor > 0.0) return config.attention_factor;
  if (config.yarn_mscale != 0.0 && config.yarn_mscale_all_dim != 0.0) {
    return YarnGetMscale(config.factor, config.yarn_mscale) /
           YarnGetMscale(config.factor, config.yarn_mscale_all_dim);
  }
  return YarnGetMscale(config.factor, 1.0);
}

// Base after the (static or dynamic) NTK-aware change.
PAGEDKV_HD double RopeNtkBase(const RopeConfig& config) {
  const double dim = RopeRotaryDim(config);
  const double exponent = dim / (dim - 2.0);
  if (config.scaling == RopeScaling::kNtk) return config.base * pow(config.factor, exponent);
  if (config.scaling == RopeScaling::kDynamicNtk) {
    const double max_pos = static_cast<double>(config.max_position_embeddings);
    const double seq_len = config.dynamic_seq_len > config.max_position_embeddings
                               ? static_cast<double>(config.dynamic_seq_len)
                               : max_pos;
    return config.base * pow(config.factor * seq_len / max_pos - (config.factor - 1.0), exponent);
  }
  return config.base;
}

// Inverse frequency of pair `pair` (0 <= pair < rotary_dim / 2) under config's scaling.
PAGEDKV_HD double RopeInvFreq(const RopeConfig& config, int32_t pair) {
  const int32_t dim = RopeRotaryDim(config);
  switch (config.scaling) {
    case RopeScaling::kLinear:
      return RopeDefaultInvFreq(config.base, dim, pair) / config.factor;
    case RopeScaling::kNtk:
    case RopeScaling::kDynamicNtk:
      return RopeDefaultInvFreq(RopeNtkBase(config), dim, pair);
    case RopeScaling::kYarn: {
      const double pos_freq = pow(config.base, static_cast<double>(2 * pair) / dim);
      const double extrapolation = 1.0 / pos_freq;
      const double interpolation = 1.0 / (config.factor * pos_freq);
      double low, high;
      YarnCorrectionRange(config, &low, &high);
      if (low == high) high += 0.001;
      double ramp = (pair - low) / (high - low);
      ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
      const double extrapolation_factor = 1.0 - ramp;
      return interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    case RopeScaling::kLlama3: {
      const double inv = RopeDefaultInvFreq(config.base, dim, pair);
      const double old_context = static_cast<double>(config.original_max_position_embeddings);
      const double low_freq_wavelen = old_context / config.low_freq_factor;
      const double high_freq_wavelen = old_context / config.high_freq_factor;
      const double wavelen = 2.0 * kRopePi / inv;
      if (wavelen < high_freq_wavelen) return inv;
      if (wavelen > low_freq_wavelen) return inv / config.factor;
      const double smooth = (old_context / wavelen - config.low_freq_factor) /
                            (config.high_freq_factor - config.low_freq_factor);
      return (1.0 - smooth) * inv / config.factor + smooth * inv;
    }
    case RopeScaling::kNone:
    default:
      return RopeDefaultInvFreq(config.base, dim, pair);
  }
}

// cos and sin of position * inv_freq, angle in float64, rounded to fp32. Negative positions give
// the inverse rotation.
PAGEDKV_HD void RopeCosSin(int64_t position, double inv_freq, float* c, float* s) {
  const double angle = static_cast<double>(position) * inv_freq;
  *c = static_cast<float>(cos(angle));
  *s = static_cast<float>(sin(angle));
}

// The two dims (a, b) forming pair `pair` in `layout` for a rotary dim of `rotary_dim`.
PAGEDKV_HD void RopePairDims(RopeLayout layout, int32_t rotary_dim, int32_t pair, int32_t* a,
                             int32_t* b) {
  if (layout == RopeLayout::kInterleaved) {
    *a = 2 * pair;
    *b = 2 * pair + 1;
  } else {
    *a = pair;
    *b = pair + rotary_dim / 2;
  }
}

// (x, y) <- (x c - y s, x s + y c): rotation by the angle whose cos/sin are (c, s).
PAGEDKV_HD void RotatePair(float* x, float* y, float c, float s) {
  const float x0 = *x;
  const float y0 = *y;
  *x = x0 * c - y0 * s;
  *y = x0 * s + y0 * c;
}

// cos/sin of (new - old) from the cos/sin of new and old: R(new) R(old)^T as one rotation.
PAGEDKV_HD void RopeComposeDelta(float c_new, float s_new, float c_old, float s_old, float* c,
                                 float* s) {
  *c = c_new * c_old + s_new * s_old;
  *s = s_new * c_old - c_new * s_old;
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_ROPE_MATH_H_
