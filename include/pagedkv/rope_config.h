// Copyright 2026 The pagedkv Authors.
//
// RopeConfig: everything that decides how a key is rotated before it is cached. Two configs with
// the same Fingerprint() produce bit-identical cached keys, so the fingerprint goes into the
// prefix-cache root hash and the shifted-reuse chunk index key.
//
// Pair layouts:
//   kInterleaved: pairs (2i, 2i+1), i < rotary_dim/2 (GPT-J, llama2.c, Meta's Llama code).
//   kHalfSplit:   pairs (i, i + rotary_dim/2)        (GPT-NeoX, Hugging Face Llama).
// Dims >= rotary_dim are not rotated (partial rotary, e.g. GPT-NeoX / Phi).
//
// Scaling variants follow Hugging Face transformers' modeling_rope_utils.py:
//   kNone        inv_freq_i = base^(-2i/d)                               (d = rotary dim)
//   kLinear      inv_freq_i / factor (_compute_linear_scaling_rope_parameters)
//   kNtk         static NTK-aware: base' = base * factor^(d/(d-2)) (the dynamic formula at a
//                fixed alpha = factor)
//   kDynamicNtk  base' = base * (factor*L/max_pos - (factor-1))^(d/(d-2)) when L exceeds
//                max_position_embeddings, else unchanged (_compute_dynamic_ntk_parameters).
//                dynamic_seq_len = 0 (the default, and what config.json's "dynamic" maps to):
//                L is each sequence's length after the step, as transformers' dynamic_rope_update
//                takes it from each forward call, and a cached key keeps the L of the step that
//                wrote it. dynamic_seq_len > 0: L is that fixed length (vLLM's static choice is
//                max_position_embeddings * factor).
//   kYarn        ramp between interpolated (/factor) and extrapolated frequencies over the
//                correction range [beta_fast, beta_slow] at original_max_position_embeddings, and
//                an attention factor (mscale) multiplying cos and sin (_compute_yarn_parameters).
//                Newer transformers set factor = max_position_embeddings /
//                original_max_position_embeddings when the latter is given: do that when converting
//                such a config; here factor is used as given.
//   kLlama3      wavelength bands: low frequencies / factor, high unchanged, smooth in between
//                (_compute_llama3_parameters).
//
// Example (Llama 3.1 8B):
//   pagedkv::RopeConfig rope;
//   rope.head_dim = 128;
//   rope.base = 500000.0;
//   rope.layout = pagedkv::RopeLayout::kHalfSplit;
//   rope.scaling = pagedkv::RopeScaling::kLlama3;
//   rope.factor = 8.0;
//   rope.low_freq_factor = 1.0;
//   rope.high_freq_factor = 4.0;
//   rope.original_max_position_embeddings = 8192;
//   rope.max_position_embeddings = 131072;
//   PAGEDKV_RETURN_IF_ERROR(rope.Validate());
//   std::string fp = rope.Fingerprint();
#ifndef PAGEDKV_ROPE_CONFIG_H_
#define PAGEDKV_ROPE_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/export.h"

namespace pagedkv {

// Which dims form a rotated pair.
enum class RopeLayout : int32_t {
  kInterleaved = 0,  // (2i, 2i+1): GPT-J, llama2.c
  kHalfSplit = 1,    // (i, i + rotary_dim/2): GPT-NeoX, Hugging Face Llama
};

// Frequency scaling variant (Hugging Face rope_type in parentheses).
enum class RopeScaling : int32_t {
  kNone = 0,        // ("default")
  kLinear = 1,      // ("linear")
  kNtk = 2,         // static NTK-aware base change
  kDynamicNtk = 3,  // ("dynamic")
  kYarn = 4,        // ("yarn")
  kLlama3 = 5,      // ("llama3")
};

// Largest supported head_dim (the kernels keep one head in registers / on the stack).
inline constexpr int32_t kMaxHeadDim = 256;

struct PAGEDKV_EXPORT RopeConfig {
  int32_t head_dim = 64;                       // size of one attention head; even, <= kMaxHeadDim
  int32_t rotary_dim = 0;                      // dims rotated (even, <= head_dim); 0 means head_dim
  double base = 10000.0;                       // rope_theta
  RopeLayout layout = RopeLayout::kHalfSplit;  // pair layout
  RopeScaling scaling = RopeScaling::kNone;    // frequency scaling variant
  double factor = 1.0;  // scaling factor (linear, NTK alpha, dynamic, YaRN, Llama-3)
  int64_t max_position_embeddings = 2048;        // config.max_position_embeddings
  int64_t original_max_position_embeddings = 0;  // YaRN / Llama-3 pretraining context; 0: use
                                                 // max_position_embeddings (YaRN), required
                                                 // (Llama-3)
  double low_freq_factor = 1.0;                  // Llama-3 low_freq_factor
  double high_freq_factor = 4.0;                 // Llama-3 high_freq_factor
  double beta_fast = 32.0;                       // YaRN beta_fast
  double beta_slow = 1.0;                        // YaRN beta_slow
  bool yarn_truncate = true;         // YaRN: floor/ceil the correction range (HF "truncate")
  double yarn_mscale = 0.0;          // YaRN "mscale" (0: unset)
  double yarn_mscale_all_dim = 0.0;  // YaRN "mscale_all_dim" (0: unset)
  double attention_factor = 0.0;     // YaRN explicit "attention_factor" (0: derive from factor)
  int64_t dynamic_seq_len = 0;       // dynamic NTK: fixed length L; 0: each step's (see above)

  // rotary_dim, resolved (head_dim when 0).
  int32_t RotaryDim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }

  // OK, or InvalidArgument naming the bad field and what to change.
  absl::Status Validate() const;

  // Stable text listing every field that affects the rotated values (only those that matter for
  // the chosen scaling), e.g. "rope/v1/hd=64/rd=64/base=10000/layout=half/scaling=none".
  std::string Fingerprint() const;
};

// "interleaved" / "half_split".
PAGEDKV_EXPORT const char* RopeLayoutName(RopeLayout layout);
PAGEDKV_EXPORT absl::StatusOr<RopeLayout> ParseRopeLayout(std::string_view name);

// "none", "linear", "ntk", "dynamic", "yarn", "llama3" (ParseRopeScaling also accepts "default").
PAGEDKV_EXPORT const char* RopeScalingName(RopeScaling scaling);
PAGEDKV_EXPORT absl::StatusOr<RopeScaling> ParseRopeScaling(std::string_view name);

}  // namespace pagedkv

#endif  // PAGEDKV_ROPE_CONFIG_H_
