// Copyright 2026 The pagedkv Authors.
#include "pagedkv/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// Every tensor must have fewer elements than this (kernels index with int32 offsets per row).
constexpr int64_t kMaxTensorElements = int64_t{1} << 31;
// Most weights of a whole model: 2^40 (4 TiB of fp32).
constexpr int64_t kMaxPayloadElements = int64_t{1} << 40;

}  // namespace

int64_t ModelConfig::NumParameters() const {
  const int64_t d = dim;
  const int64_t h = hidden_dim;
  const int64_t q = q_dim();
  const int64_t kv = kv_dim();
  int64_t per_layer = 2 * d + q * d * 2 + 2 * kv * d + 3 * d * h;
  if (qkv_bias) per_layer += q + 2 * kv;
  int64_t total = int64_t{vocab_size} * d + n_layers * per_layer + d;
  if (!shared_classifier) total += int64_t{vocab_size} * d;
  return total;
}

absl::Status ModelConfig::Validate() const {
  auto positive = [](const char* name, int32_t value) -> absl::Status {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model config: %s must be positive, got %d", name, value));
    }
    return absl::OkStatus();
  };
  for (const auto& [name, value] : {std::pair<const char*, int32_t>{"dim", dim},
                                    {"hidden_dim", hidden_dim},
                                    {"n_layers", n_layers},
                                    {"n_heads", n_heads},
                                    {"n_kv_heads", n_kv_heads},
                                    {"vocab_size", vocab_size},
                                    {"seq_len", seq_len}}) {
    if (absl::Status s = positive(name, value); !s.ok()) return s;
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateHeads());
  // Every product below is of values below 2^31 (checked above), so it fits int64.
  const int64_t q = int64_t{n_heads} * head_dim(), kv = int64_t{n_kv_heads} * head_dim();
  const int64_t biggest = std::max({int64_t{vocab_size} * dim, q * dim, kv * dim,
                                    int64_t{dim} * hidden_dim, int64_t{seq_len} * head_dim(), q});
  if (biggest >= kMaxTensorElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: a tensor would hold %d elements, more than the supported 2^31", biggest));
  }
  // The whole payload stays below 2^40 floats, so the size arithmetic of every loader (and a
  // file size check against it) cannot overflow: each tensor is capped above, the per-layer sum
  // times n_layers is checked here.
  const int64_t per_layer =
      2 * int64_t{dim} + 2 * q * dim + 2 * kv * dim + 3 * int64_t{dim} * hidden_dim + q + 2 * kv;
  int64_t all_layers = 0;
  if (!CheckedMul(per_layer, int64_t{n_layers}, &all_layers) || all_layers > kMaxPayloadElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: %d layers of %d weights each pass the supported 2^40 weights", n_layers,
        per_layer));
  }
  if (!(rms_norm_eps > 0.0f) || !std::isfinite(rms_norm_eps)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: rms_norm_eps must be positive, got %g", rms_norm_eps));
  }
  if (!(rope_base > 1.0f) || !std::isfinite(rope_base)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: rope_base must be > 1, got %g", rope_base));
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateRopeAndTokens());
  return ValidateLayerWindow();
}

bool ModelConfig::HasSlidingWindow() const {
  return std::any_of(layer_window.begin(), layer_window.end(), [](int32_t w) { return w > 0; });
}

absl::Status ModelConfig::ValidateLayerWindow() const {
  if (!layer_window.empty() && layer_window.size() != static_cast<size_t>(n_layers)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: layer_window has %d entries; it must be empty (no sliding window) or have "
        "one per layer (n_layers = %d)",
        layer_window.size(), n_layers));
  }
  for (size_t l = 0; l < layer_window.size(); ++l) {
    if (layer_window[l] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model config: layer_window[%d] = %d must be >= 0 (0: full attention, W > 0: the last "
          "W positions)",
          l, layer_window[l]));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelConfig::ValidateHeads() const {
  if (explicit_head_dim < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: explicit_head_dim must be >= 0 (0: dim / n_heads), got %d",
                        explicit_head_dim));
  }
  if (explicit_head_dim == 0 && dim % n_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: n_heads (%d) must divide dim (%d), or set explicit_head_dim", n_heads, dim));
  }
  if (n_heads % n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: n_kv_heads (%d) must divide n_heads (%d)", n_kv_heads, n_heads));
  }
  if (head_dim() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: head_dim = %d must be even (RoPE rotates pairs)", head_dim()));
  }
  // q_dim() and kv_dim() are int32: n_heads * head_dim must fit (kv heads are fewer).
  if (int64_t{n_heads} * head_dim() >= kMaxTensorElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: n_heads * head_dim = %d * %d passes the supported 2^31",
                        n_heads, head_dim()));
  }
  return absl::OkStatus();
}

absl::Status ModelConfig::ValidateRopeAndTokens() const {
  if (rope.has_value()) {
    if (rope->head_dim != head_dim()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model config: rope.head_dim (%d) must equal head_dim (%d)", rope->head_dim, head_dim()));
    }
    if (absl::Status s = rope->Validate(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model config: rope: ", s.message()));
    }
  }
  if (bos_token_id < 0 || bos_token_id >= vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: bos_token_id %d is outside the vocabulary [0, %d)",
                        bos_token_id, vocab_size));
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model config: stop token %d (eos_token_id) is outside the vocabulary [0, %d)", id,
          vocab_size));
    }
  }
  return absl::OkStatus();
}

std::string ModelConfig::ToString() const {
  const std::string base = absl::StrFormat(
      "dim=%d hidden_dim=%d n_layers=%d n_heads=%d n_kv_heads=%d vocab_size=%d seq_len=%d "
      "shared_classifier=%d rms_norm_eps=%g rope_base=%g",
      dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
      shared_classifier ? 1 : 0, rms_norm_eps, rope_base);
  // Only an explicit head width is listed, so the text of older configs is unchanged.
  const std::string head =
      explicit_head_dim > 0 ? absl::StrFormat(" head_dim=%d", explicit_head_dim) : "";
  // Likewise the windows only when some layer has one.
  const std::string window =
      HasSlidingWindow() ? absl::StrCat(" layer_window=", absl::StrJoin(layer_window, ",")) : "";
  return absl::StrCat(base, head, rope.has_value() ? " " : "",
                      rope.has_value() ? rope->Fingerprint() : "", qkv_bias ? " qkv_bias=1" : "",
                      window);
}

}  // namespace pagedkv
