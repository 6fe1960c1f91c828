// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/hf_config.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/formats/hf_sliding_window.h"
#include "engine/model/formats/json_fields.h"
#include "nlohmann/json.hpp"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

using nlohmann::json;

absl::Status Unsupported(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": unsupported ", what));
}

absl::StatusOr<std::string> ReadArchitecture(const json& j, const std::string& where) {
  const json* a = FindField(j, "architectures");
  if (a == nullptr || !a->is_array() || a->size() != 1 || !(*a)[0].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": \"architectures\" must list exactly one architecture (LlamaForCausalLM, "
                     "MistralForCausalLM or Qwen2ForCausalLM)"));
  }
  std::string arch = (*a)[0].get<std::string>();
  if (arch != "LlamaForCausalLM" && arch != "MistralForCausalLM" && arch != "Qwen2ForCausalLM") {
    return Unsupported(where, absl::StrCat("architecture \"", arch,
                                           "\" (supported: LlamaForCausalLM, MistralForCausalLM, "
                                           "Qwen2ForCausalLM)"));
  }
  return arch;
}

// Fields that change the math and are not implemented.
absl::Status RefuseUnsupported(const json& j, const std::string& arch, const std::string& where) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> act, OptionalString(j, "hidden_act", where));
  if (act.has_value() && *act != "silu") {
    return Unsupported(where, absl::StrCat("hidden_act \"", *act, "\" (only \"silu\")"));
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> on, OptionalBool(j, key, where));
    if (on.value_or(false)) return Unsupported(where, absl::StrCat(key, " = true"));
  }
  // Mistral and Qwen2 windows are read by ReadHfSlidingWindow; Llama has none.
  if (arch == "LlamaForCausalLM") {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> on, OptionalBool(j, "use_sliding_window", where));
    if (on.value_or(false)) {
      return Unsupported(where, "use_sliding_window = true (LlamaForCausalLM)");
    }
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> partial,
                           OptionalNumber(j, "partial_rotary_factor", where));
  if (partial.has_value() && *partial != 1.0) {
    return Unsupported(where, absl::StrFormat("partial_rotary_factor = %g (only 1)", *partial));
  }
  if (FindField(j, "quantization_config") != nullptr) {
    return Unsupported(where, "quantization_config (only F32, F16 and BF16 weights)");
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> Int32Field(const json& j, const std::string& key, const std::string& where,
                                   std::optional<int64_t> fallback = std::nullopt) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalInt(j, key, where));
  if (!v.has_value()) v = fallback;
  if (!v.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": missing required field \"", key, "\""));
  }
  if (*v <= 0 || *v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", key, "\" must be in [1, 2^31), got ", *v));
  }
  return static_cast<int32_t>(*v);
}

absl::Status ReadShape(const json& j, const std::string& where, ModelConfig* c) {
  PAGEDKV_ASSIGN_OR_RETURN(c->dim, Int32Field(j, "hidden_size", where));
  PAGEDKV_ASSIGN_OR_RETURN(c->hidden_dim, Int32Field(j, "intermediate_size", where));
  PAGEDKV_ASSIGN_OR_RETURN(c->n_layers, Int32Field(j, "num_hidden_layers", where));
  PAGEDKV_ASSIGN_OR_RETURN(c->n_heads, Int32Field(j, "num_attention_heads", where));
  PAGEDKV_ASSIGN_OR_RETURN(c->n_kv_heads, Int32Field(j, "num_key_value_heads", where, c->n_heads));
  PAGEDKV_ASSIGN_OR_RETURN(c->vocab_size, Int32Field(j, "vocab_size", where));
  PAGEDKV_ASSIGN_OR_RETURN(c->seq_len, Int32Field(j, "max_position_embeddings", where));
  // head_dim (Gemma, Qwen3, many fine-tunes) may differ from hidden_size / num_attention_heads;
  // it is kept explicit only then, so the config's text (and cache fingerprint) of a model that
  // writes the default is unchanged. A null head_dim means the default, as in transformers.
  if (const json* hd = FindField(j, "head_dim"); hd != nullptr && !hd->is_null()) {
    PAGEDKV_ASSIGN_OR_RETURN(int32_t head_dim, Int32Field(j, "head_dim", where));
    if (c->dim % c->n_heads != 0 || head_dim != c->dim / c->n_heads) {
      c->explicit_head_dim = head_dim;
    }
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> eps, OptionalNumber(j, "rms_norm_eps", where));
  c->rms_norm_eps = static_cast<float>(eps.value_or(1e-6));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> tie, OptionalBool(j, "tie_word_embeddings", where));
  c->shared_classifier = tie.value_or(false);  // Llama, Mistral and Qwen2 default to untied
  return absl::OkStatus();
}

// The rope_scaling keys each type reads; any other key is refused.
bool KnownScalingKey(const std::string& key) {
  for (const char* k : {"type", "rope_type", "factor", "original_max_position_embeddings",
                        "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow", "mscale",
                        "mscale_all_dim", "attention_factor", "truncate"}) {
    if (key == k) return true;
  }
  return false;
}

absl::Status ReadScalingNumbers(const json& s, const std::string& where, RopeConfig* rope) {
  auto number = [&](const char* key, double* out) -> absl::Status {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> v, OptionalNumber(s, key, where));
    if (v.has_value()) *out = *v;
    return absl::OkStatus();
  };
  PAGEDKV_RETURN_IF_ERROR(number("factor", &rope->factor));
  PAGEDKV_RETURN_IF_ERROR(number("low_freq_factor", &rope->low_freq_factor));
  PAGEDKV_RETURN_IF_ERROR(number("high_freq_factor", &rope->high_freq_factor));
  PAGEDKV_RETURN_IF_ERROR(number("beta_fast", &rope->beta_fast));
  PAGEDKV_RETURN_IF_ERROR(number("beta_slow", &rope->beta_slow));
  PAGEDKV_RETURN_IF_ERROR(number("mscale", &rope->yarn_mscale));
  PAGEDKV_RETURN_IF_ERROR(number("mscale_all_dim", &rope->yarn_mscale_all_dim));
  PAGEDKV_RETURN_IF_ERROR(number("attention_factor", &rope->attention_factor));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> truncate, OptionalBool(s, "truncate", where));
  rope->yarn_truncate = truncate.value_or(true);
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> orig,
                           OptionalInt(s, "original_max_position_embeddings", where));
  if (orig.has_value()) rope->original_max_position_embeddings = *orig;
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const json& j, const std::string& where, RopeConfig* rope) {
  const json* s = FindField(j, "rope_scaling");
  if (s == nullptr) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": rope_scaling");
  if (!s->is_object()) return absl::InvalidArgumentError(at + " must be an object or null");
  for (auto it = s->begin(); it != s->end(); ++it) {
    if (!KnownScalingKey(it.key())) return Unsupported(at, absl::StrCat("key \"", it.key(), "\""));
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> type, OptionalString(*s, "rope_type", at));
  if (!type.has_value()) {
    PAGEDKV_ASSIGN_OR_RETURN(type, OptionalString(*s, "type", at));
  }
  const std::string t = type.value_or("default");
  if (t == "default") return absl::OkStatus();
  if (t == "linear")
    rope->scaling = RopeScaling::kLinear;
  else if (t == "dynamic")
    rope->scaling = RopeScaling::kDynamicNtk;
  else if (t == "yarn")
    rope->scaling = RopeScaling::kYarn;
  else if (t == "llama3")
    rope->scaling = RopeScaling::kLlama3;
  else
    return Unsupported(at, absl::StrCat("type \"", t,
                                        "\" (supported: default, linear, "
                                        "dynamic, yarn, llama3)"));
  if (FindField(*s, "factor") == nullptr) return absl::InvalidArgumentError(at + ": needs factor");
  PAGEDKV_RETURN_IF_ERROR(ReadScalingNumbers(*s, at, rope));
  if (rope->scaling == RopeScaling::kYarn && rope->original_max_position_embeddings > 0) {
    // transformers' _compute_yarn_parameters: the factor is max / original when both are given.
    rope->factor = static_cast<double>(rope->max_position_embeddings) /
                   static_cast<double>(rope->original_max_position_embeddings);
  }
  return absl::OkStatus();
}

// An int or a list of ints; absent gives an empty list.
absl::StatusOr<std::vector<int32_t>> TokenIdList(const json& j, const std::string& key,
                                                 const std::string& where) {
  const json* f = FindField(j, key);
  std::vector<int32_t> ids;
  if (f == nullptr) return ids;
  const json list = f->is_array() ? *f : json::array({*f});
  for (const json& v : list) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", key, "\" must be a token id or a list of token ids"));
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

absl::Status ReadTokenIds(const json& config, const json& gen, const std::string& where,
                          ModelConfig* c) {
  const std::string gen_where = absl::StrCat(where, "/generation_config.json");
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<int32_t> eos, TokenIdList(gen, "eos_token_id", gen_where));
  if (eos.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(eos, TokenIdList(config, "eos_token_id", where));
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<int32_t> bos, TokenIdList(gen, "bos_token_id", gen_where));
  if (bos.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(bos, TokenIdList(config, "bos_token_id", where));
  }
  if (bos.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": bos_token_id must be one id"));
  }
  c->stop_token_ids = eos;
  c->bos_token_id = bos.empty() ? 0 : bos[0];
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HfConfig> ParseHfConfig(const std::string& config_json,
                                       const std::string& generation_json,
                                       const std::string& where) {
  const std::string cw = absl::StrCat(where, "/config.json");
  PAGEDKV_ASSIGN_OR_RETURN(json j, ParseJson(config_json, cw));
  if (!j.is_object()) return absl::InvalidArgumentError(cw + ": not a JSON object");
  json gen = json::object();
  if (!generation_json.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(
        gen, ParseJson(generation_json, absl::StrCat(where, "/generation_config.json")));
    if (!gen.is_object()) gen = json::object();
  }
  HfConfig hf;
  PAGEDKV_ASSIGN_OR_RETURN(hf.architecture, ReadArchitecture(j, cw));
  PAGEDKV_RETURN_IF_ERROR(RefuseUnsupported(j, hf.architecture, cw));
  ModelConfig& c = hf.config;
  PAGEDKV_RETURN_IF_ERROR(ReadShape(j, cw, &c));
  PAGEDKV_RETURN_IF_ERROR(ReadHfSlidingWindow(j, hf.architecture, cw, &c));
  c.qkv_bias = hf.architecture == "Qwen2ForCausalLM";
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> theta, OptionalNumber(j, "rope_theta", cw));
  RopeConfig rope;
  rope.base = theta.value_or(10000.0);
  rope.layout = RopeLayout::kHalfSplit;
  rope.max_position_embeddings = c.seq_len;
  rope.head_dim = c.explicit_head_dim > 0                   ? c.explicit_head_dim
                  : c.n_heads > 0 && c.dim % c.n_heads == 0 ? c.dim / c.n_heads
                                                            : 0;
  PAGEDKV_RETURN_IF_ERROR(ReadRopeScaling(j, cw, &rope));
  c.rope_base = static_cast<float>(rope.base);
  c.rope = rope;
  PAGEDKV_RETURN_IF_ERROR(ReadTokenIds(j, gen, where, &c));
  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(cw, ": ", s.message()));
  }
  return hf;
}

}  // namespace pagedkv::model_internal
