// Copyright 2026 The pagedkv Authors.
//
// RopeConfig validation, fingerprint and enum names.
#include "pagedkv/rope_config.h"

#include <cmath>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

std::string Num(double value) { return absl::StrFormat("%.17g", value); }

bool Positive(double value) { return std::isfinite(value) && value > 0.0; }

}  // namespace

const char* RopeLayoutName(RopeLayout layout) {
  switch (layout) {
    case RopeLayout::kInterleaved:
      return "interleaved";
    case RopeLayout::kHalfSplit:
      return "half_split";
  }
  return "invalid";
}

absl::StatusOr<RopeLayout> ParseRopeLayout(std::string_view name) {
  if (name == "interleaved" || name == "gptj") return RopeLayout::kInterleaved;
  if (name == "half_split" || name == "neox") return RopeLayout::kHalfSplit;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown RoPE layout '", std::string(name),
                   "': use interleaved (GPT-J, llama2.c) or half_split (NeoX, HF)"));
}

const char* RopeScalingName(RopeScaling scaling) {
  switch (scaling) {
    case RopeScaling::kNone:
      return "none";
    case RopeScaling::kLinear:
      return "linear";
    case RopeScaling::kNtk:
      return "ntk";
    case RopeScaling::kDynamicNtk:
      return "dynamic";
    case RopeScaling::kYarn:
      return "yarn";
    case RopeScaling::kLlama3:
      return "llama3";
  }
  return "invalid";
}

absl::StatusOr<RopeScaling> ParseRopeScaling(std::string_view name) {
  if (name == "none" || name == "default") return RopeScaling::kNone;
  if (name == "linear") return RopeScaling::kLinear;
  if (name == "ntk") return RopeScaling::kNtk;
  if (name == "dynamic" || name == "dynamic_ntk") return RopeScaling::kDynamicNtk;
  if (name == "yarn") return RopeScaling::kYarn;
  if (name == "llama3") return RopeScaling::kLlama3;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown RoPE scaling '", std::string(name),
                   "': use none, linear, ntk, dynamic, yarn or llama3"));
}

namespace {

absl::Status ValidateShape(const RopeConfig& c) {
  if (c.head_dim < 2 || c.head_dim > kMaxHeadDim || c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("RopeConfig.head_dim = ", c.head_dim,
                                                   " is unsupported: use an even value in [2, ",
                                                   kMaxHeadDim, "]"));
  }
  const int32_t rotary_dim = c.RotaryDim();
  if (rotary_dim < 2 || rotary_dim > c.head_dim || rotary_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("RopeConfig.rotary_dim = ", c.rotary_dim,
                                                   " must be 0 (= head_dim) or even in [2, ",
                                                   c.head_dim, "]"));
  }
  if (!Positive(c.base) || c.base <= 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RopeConfig.base = ", Num(c.base), " must be finite and > 1"));
  }
  if (c.layout != RopeLayout::kInterleaved && c.layout != RopeLayout::kHalfSplit) {
    return absl::InvalidArgumentError("RopeConfig.layout is not a RopeLayout value");
  }
  if (c.max_position_embeddings < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RopeConfig.max_position_embeddings = ", c.max_position_embeddings, " must be >= 1"));
  }
  return absl::OkStatus();
}

absl::Status ValidateFactor(const RopeConfig& c) {
  if (!Positive(c.factor) || c.factor < 1.0) {
    return absl::InvalidArgumentError(absl::StrCat("RopeConfig.factor = ", Num(c.factor),
                                                   " must be >= 1 for ", RopeScalingName(c.scaling),
                                                   " scaling"));
  }
  return absl::OkStatus();
}

// Linear, NTK and dynamic NTK.
absl::Status ValidateNtkFamily(const RopeConfig& c) {
  PAGEDKV_RETURN_IF_ERROR(ValidateFactor(c));
  if (c.scaling != RopeScaling::kLinear && c.RotaryDim() < 4) {
    return absl::InvalidArgumentError("NTK scaling needs rotary_dim >= 4 (d / (d - 2))");
  }
  if (c.dynamic_seq_len < 0) {
    return absl::InvalidArgumentError("RopeConfig.dynamic_seq_len must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateYarn(const RopeConfig& c) {
  PAGEDKV_RETURN_IF_ERROR(ValidateFactor(c));
  if (!Positive(c.beta_fast) || !Positive(c.beta_slow) || c.beta_fast <= c.beta_slow) {
    return absl::InvalidArgumentError(absl::StrCat("RopeConfig.beta_fast = ", Num(c.beta_fast),
                                                   " and beta_slow = ", Num(c.beta_slow),
                                                   " must be positive with beta_fast > beta_slow"));
  }
  if (c.original_max_position_embeddings < 0) {
    return absl::InvalidArgumentError(
        "RopeConfig.original_max_position_embeddings must be >= 0 (0: "
        "max_position_embeddings)");
  }
  if (c.attention_factor < 0.0 || !std::isfinite(c.attention_factor) ||
      !std::isfinite(c.yarn_mscale) || !std::isfinite(c.yarn_mscale_all_dim)) {
    return absl::InvalidArgumentError(
        "RopeConfig.attention_factor / yarn_mscale / yarn_mscale_all_dim must be finite, "
        "attention_factor >= 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateLlama3(const RopeConfig& c) {
  PAGEDKV_RETURN_IF_ERROR(ValidateFactor(c));
  if (c.original_max_position_embeddings < 1) {
    return absl::InvalidArgumentError(
        "llama3 scaling needs RopeConfig.original_max_position_embeddings >= 1 (8192 for "
        "Llama 3.1)");
  }
  if (!Positive(c.low_freq_factor) || !Positive(c.high_freq_factor) ||
      c.high_freq_factor <= c.low_freq_factor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RopeConfig.low_freq_factor = ", Num(c.low_freq_factor), " and high_freq_factor = ",
        Num(c.high_freq_factor), " must be positive with high_freq_factor > low_freq_factor"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RopeConfig::Validate() const {
  PAGEDKV_RETURN_IF_ERROR(ValidateShape(*this));
  switch (scaling) {
    case RopeScaling::kNone:
      return absl::OkStatus();
    case RopeScaling::kLinear:
    case RopeScaling::kNtk:
    case RopeScaling::kDynamicNtk:
      return ValidateNtkFamily(*this);
    case RopeScaling::kYarn:
      return ValidateYarn(*this);
    case RopeScaling::kLlama3:
      return ValidateLlama3(*this);
  }
  return absl::InvalidArgumentError("RopeConfig.scaling is not a RopeScaling value");
}

std::string RopeConfig::Fingerprint() const {
  std::string out =
      absl::StrCat("rope/v1/hd=", head_dim, "/rd=", RotaryDim(), "/base=", Num(base),
                   "/layout=", RopeLayoutName(layout), "/scaling=", RopeScalingName(scaling));
  switch (scaling) {
    case RopeScaling::kNone:
      break;
    case RopeScaling::kLinear:
    case RopeScaling::kNtk:
      absl::StrAppend(&out, "/factor=", Num(factor));
      break;
    case RopeScaling::kDynamicNtk:
      absl::StrAppend(&out, "/factor=", Num(factor), "/max_pos=", max_position_embeddings);
      if (dynamic_seq_len == 0) {
        absl::StrAppend(&out, "/seq_len=per_step");  // keys depend on the step that wrote them
      } else {
        absl::StrAppend(
            &out, "/seq_len=",
            dynamic_seq_len > max_position_embeddings ? dynamic_seq_len : max_position_embeddings);
      }
      break;
    case RopeScaling::kYarn:
      absl::StrAppend(&out, "/factor=", Num(factor), "/orig_max_pos=",
                      original_max_position_embeddings > 0 ? original_max_position_embeddings
                                                           : max_position_embeddings,
                      "/beta_fast=", Num(beta_fast), "/beta_slow=", Num(beta_slow),
                      "/truncate=", yarn_truncate ? 1 : 0, "/mscale=", Num(yarn_mscale),
                      "/mscale_all_dim=", Num(yarn_mscale_all_dim),
                      "/attention_factor=", Num(attention_factor));
      break;
    case RopeScaling::kLlama3:
      absl::StrAppend(&out, "/factor=", Num(factor),
                      "/orig_max_pos=", original_max_position_embeddings,
                      "/low=", Num(low_freq_factor), "/high=", Num(high_freq_factor));
      break;
  }
  return out;
}

}  // namespace pagedkv
