// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/hf_checkpoint.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/formats/file_bytes.h"
#include "engine/model/formats/hf_config.h"
#include "engine/model/formats/safetensors.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

// Reads tensors into a growing fp32 buffer, recording which names were used. With `native`
// (native storage), matrices stored as F16 / BF16 keep their bytes there instead, and every
// matrix's type is recorded.
class TensorPacker {
 public:
  TensorPacker(const SafetensorsCheckpoint& ckpt, std::vector<float>* out,
               NativeWeightParts* native = nullptr)
      : ckpt_(ckpt), out_(out), native_(native) {}

  // Appends tensor `name` of `shape`; `matrix`: one of the payload's matrices.
  absl::Status Append(const std::string& name, std::vector<int64_t> shape, bool matrix = false) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (native_ != nullptr && matrix) {
      PAGEDKV_ASSIGN_OR_RETURN(auto stored, ckpt_.Stored(name, shape));
      const std::string& dtype = stored.first->dtype;
      const WeightType type = dtype == "F16"    ? WeightType::kF16
                              : dtype == "BF16" ? WeightType::kBF16
                                                : WeightType::kF32;
      native_->matrix_types.push_back(type);
      if (type != WeightType::kF32) return AppendHalves(name, type, stored.second, n);
    }
    const size_t at = out_->size();
    out_->resize(at + static_cast<size_t>(n));
    PAGEDKV_RETURN_IF_ERROR(ckpt_.ReadF32(name, shape, out_->data() + at));
    for (int64_t i = 0; i < n; ++i) {
      PAGEDKV_RETURN_IF_ERROR(CheckFinite(name, (*out_)[at + static_cast<size_t>(i)], i));
    }
    used_.insert(name);
    return absl::OkStatus();
  }
  void Pad(int64_t n) { out_->resize(out_->size() + static_cast<size_t>(n), 0.0f); }
  void MarkUsed(const std::string& name) { used_.insert(name); }
  bool Used(const std::string& name) const { return used_.contains(name); }

 private:
  absl::Status CheckFinite(const std::string& name, float v, int64_t i) const {
    if (std::isfinite(v)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "safetensors checkpoint '%s': tensor '%s' holds a non-finite value at element %d",
        ckpt_.dir(), name, i));
  }

  // The tensor's n half values kept as stored, each checked finite.
  absl::Status AppendHalves(const std::string& name, WeightType type, std::string_view bytes,
                            int64_t n) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    for (int64_t i = 0; i < n; ++i) {
      PAGEDKV_RETURN_IF_ERROR(CheckFinite(name, QuantValue(type, p, i), i));
    }
    native_->native.insert(native_->native.end(), p, p + bytes.size());
    used_.insert(name);
    return absl::OkStatus();
  }

  const SafetensorsCheckpoint& ckpt_;
  std::vector<float>* out_;
  NativeWeightParts* native_;
  absl::flat_hash_set<std::string> used_;
};

std::string LayerName(int32_t l, const char* rest) {
  return absl::StrCat("model.layers.", l, ".", rest);
}

// The embedding (or, tied, whichever of embed_tokens / lm_head is stored).
absl::StatusOr<std::string> EmbeddingName(const SafetensorsCheckpoint& ckpt, const ModelConfig& c) {
  const std::string embed = "model.embed_tokens.weight", head = "lm_head.weight";
  if (ckpt.Has(embed)) return embed;
  if (c.shared_classifier && ckpt.Has(head)) return head;
  return absl::InvalidArgumentError(
      absl::StrCat("safetensors checkpoint '", ckpt.dir(), "': missing tensor '", embed, "'",
                   c.shared_classifier ? " (and no lm_head.weight to tie it to)"
                                       : " (tie_word_embeddings is false)"));
}

// Appends the tensors in llama2.c's payload order: each kind for every layer, kind after kind.
absl::Status PackPayload(const SafetensorsCheckpoint& ckpt, const ModelConfig& c, TensorPacker& p) {
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), v = c.vocab_size;
  PAGEDKV_ASSIGN_OR_RETURN(std::string embed, EmbeddingName(ckpt, c));
  PAGEDKV_RETURN_IF_ERROR(p.Append(embed, {v, d}, /*matrix=*/true));
  const std::pair<const char*, std::vector<int64_t>> kinds[] = {
      {"input_layernorm.weight", {d}},      {"self_attn.q_proj.weight", {q, d}},
      {"self_attn.k_proj.weight", {kv, d}}, {"self_attn.v_proj.weight", {kv, d}},
      {"self_attn.o_proj.weight", {d, q}},  {"post_attention_layernorm.weight", {d}},
      {"mlp.gate_proj.weight", {h, d}},     {"mlp.down_proj.weight", {d, h}},
      {"mlp.up_proj.weight", {h, d}}};
  for (const auto& [kind, shape] : kinds) {
    for (int32_t l = 0; l < c.n_layers; ++l) {
      PAGEDKV_RETURN_IF_ERROR(p.Append(LayerName(l, kind), shape, shape.size() == 2));
    }
  }
  PAGEDKV_RETURN_IF_ERROR(p.Append("model.norm.weight", {d}));
  p.Pad(int64_t{c.seq_len} * c.head_dim());  // llama2.c's freq_cis tables (unused)
  if (!c.shared_classifier) {
    PAGEDKV_RETURN_IF_ERROR(p.Append("lm_head.weight", {v, d}, /*matrix=*/true));
  } else if (ckpt.Has("lm_head.weight")) {
    p.MarkUsed("lm_head.weight");  // tied: the embedding is the classifier
  }
  return absl::OkStatus();
}

absl::Status PackBiases(const ModelConfig& c, TensorPacker& p) {
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  for (int32_t l = 0; l < c.n_layers && c.qkv_bias; ++l) {
    PAGEDKV_RETURN_IF_ERROR(p.Append(LayerName(l, "self_attn.q_proj.bias"), {q}));
    PAGEDKV_RETURN_IF_ERROR(p.Append(LayerName(l, "self_attn.k_proj.bias"), {kv}));
    PAGEDKV_RETURN_IF_ERROR(p.Append(LayerName(l, "self_attn.v_proj.bias"), {kv}));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadOptionalFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::string();
  return ReadFileBytes(path.string(), "model file");
}

}  // namespace

bool IsHfModelDir(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec) &&
         std::filesystem::exists(std::filesystem::path(dir) / "config.json", ec);
}

absl::StatusOr<ModelWeights> LoadHfWeights(const std::string& dir, WeightStorage storage) {
  const std::filesystem::path root(dir);
  PAGEDKV_ASSIGN_OR_RETURN(std::string config_text,
                           ReadFileBytes((root / "config.json").string(), "config.json"));
  PAGEDKV_ASSIGN_OR_RETURN(std::string gen_text, ReadOptionalFile(root / "generation_config.json"));
  PAGEDKV_ASSIGN_OR_RETURN(HfConfig hf, ParseHfConfig(config_text, gen_text, dir));
  PAGEDKV_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(dir));
  std::vector<float> payload, bias;
  NativeWeightParts parts;
  if (storage == WeightStorage::kF32) {
    payload.reserve(static_cast<size_t>(ModelWeights::PayloadSize(hf.config)));
  }
  TensorPacker packer(ckpt, &payload, storage == WeightStorage::kNative ? &parts : nullptr);
  PAGEDKV_RETURN_IF_ERROR(PackPayload(ckpt, hf.config, packer));
  TensorPacker bias_packer(ckpt, &bias);
  PAGEDKV_RETURN_IF_ERROR(PackBiases(hf.config, bias_packer));
  for (const std::string& name : ckpt.Names()) {
    if (packer.Used(name) || bias_packer.Used(name) ||
        absl::EndsWith(name, "rotary_emb.inv_freq")) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "'%s': tensor '%s' is not part of a %s model as config.json describes it (unsupported "
        "weights)",
        dir, name, hf.architecture));
  }
  if (parts.native.empty()) {
    return ModelWeights::FromParts(hf.config, std::move(payload), std::move(bias));
  }
  parts.payload = std::move(payload);
  parts.qkv_bias = std::move(bias);
  return ModelWeights::FromNativeParts(hf.config, std::move(parts));
}

}  // namespace pagedkv::model_internal
