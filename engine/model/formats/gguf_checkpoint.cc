// Copyright 2026 The pagedkv Authors.
//
// GGUF `llama` metadata and tensors -> ModelConfig and ModelWeights (see gguf_checkpoint.h).
#include "engine/model/formats/gguf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/model/formats/gguf_dequant.h"
#include "engine/model/formats/mapped_file.h"
#include "engine/model/tokenizers/gguf_tokenizer.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

absl::Status Bad(const GgufFile& f, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF file '", f.path(), "': ", what));
}

// An int32 field from `key`, `fallback` when absent (fallback < 0: required).
absl::Status ReadInt32(const GgufFile& f, const std::string& key, int64_t fallback, int32_t* out) {
  int64_t v = fallback;
  if (f.Find(key) != nullptr || fallback < 0) {
    PAGEDKV_ASSIGN_OR_RETURN(v, f.GetInt(key));
  }
  if (v <= 0 || v > INT32_MAX) {
    return Bad(f, absl::StrCat("key '", key, "' = ", v, " must be in [1, 2^31)"));
  }
  *out = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::StatusOr<double> OptionalFloat(const GgufFile& f, const std::string& key, double fallback) {
  if (f.Find(key) == nullptr) return fallback;
  return f.GetFloat(key);
}

absl::Status ReadRopeScaling(const GgufFile& f, RopeConfig* rope) {
  const std::string type_key = "llama.rope.scaling.type";
  std::string type = "none";
  if (f.Find(type_key) != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(type, f.GetString(type_key));
  }
  PAGEDKV_ASSIGN_OR_RETURN(rope->factor, OptionalFloat(f, "llama.rope.scaling.factor", 1.0));
  if (type == "none" || (type == "linear" && rope->factor == 1.0)) {
    rope->factor = 1.0;
    return absl::OkStatus();
  }
  if (type == "linear") {
    rope->scaling = RopeScaling::kLinear;
    return absl::OkStatus();
  }
  if (type != "yarn") {
    return Bad(f, absl::StrCat("key '", type_key, "' = '", type,
                               "' is not supported (none, linear and yarn are)"));
  }
  rope->scaling = RopeScaling::kYarn;
  PAGEDKV_ASSIGN_OR_RETURN(double orig,
                           OptionalFloat(f, "llama.rope.scaling.original_context_length", 0.0));
  rope->original_max_position_embeddings = static_cast<int64_t>(orig);
  PAGEDKV_ASSIGN_OR_RETURN(double attn, OptionalFloat(f, "llama.rope.scaling.attn_factor", 1.0));
  if (attn != 1.0) {
    return Bad(f, "key 'llama.rope.scaling.attn_factor' != 1 is not supported");
  }
  return absl::OkStatus();
}

absl::Status ReadTokenIds(const GgufFile& f, ModelConfig* c) {
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> stops, GgufStopTokens(f));
  if (!stops.empty()) c->stop_token_ids.assign(stops.begin(), stops.end());
  if (f.Find("tokenizer.ggml.bos_token_id") != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(int64_t bos, f.GetInt("tokenizer.ggml.bos_token_id"));
    if (bos < 0 || bos >= c->vocab_size) {
      return Bad(f, absl::StrCat("key 'tokenizer.ggml.bos_token_id' = ", bos,
                                 " is outside the vocabulary"));
    }
    c->bos_token_id = static_cast<int32_t>(bos);
  }
  for (TokenId id : c->stop_token_ids) {
    if (id >= c->vocab_size) {
      return Bad(
          f, absl::StrCat("stop token ", id, " is outside the model's ", c->vocab_size, " tokens"));
    }
  }
  return absl::OkStatus();
}

// attention.key_length (= value_length = rope.dimension_count) sets the head width; without it
// the head is embedding_length / head_count wide.
absl::Status ReadHeadDim(const GgufFile& f, ModelConfig* c) {
  const bool explicit_width = f.Find("llama.attention.key_length") != nullptr;
  if (!explicit_width && c->dim % c->n_heads != 0) {
    return Bad(f,
               "key 'llama.attention.head_count' must divide 'llama.embedding_length' (or give "
               "'llama.attention.key_length')");
  }
  const int32_t split = c->dim / c->n_heads;
  int32_t key_len = 0, value_len = 0, rot = 0;
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.attention.key_length", split, &key_len));
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.attention.value_length", key_len, &value_len));
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.rope.dimension_count", key_len, &rot));
  if (value_len != key_len || rot != key_len) {
    return Bad(f, absl::StrCat("rope.dimension_count / attention.key_length / value_length (", rot,
                               ", ", key_len, ", ", value_len,
                               ") must be equal (partial rotary and value heads of another width "
                               "are not supported)"));
  }
  if (key_len <= 0 || key_len % 2 != 0) {
    return Bad(f, absl::StrCat("key 'llama.attention.key_length' = ", key_len,
                               " must be positive and even"));
  }
  if (explicit_width && (c->dim % c->n_heads != 0 || key_len != split)) {
    c->explicit_head_dim = key_len;
  }
  return absl::OkStatus();
}

absl::Status ReadShape(const GgufFile& f, ModelConfig* c) {
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.context_length", -1, &c->seq_len));
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.embedding_length", -1, &c->dim));
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.block_count", -1, &c->n_layers));
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.feed_forward_length", -1, &c->hidden_dim));
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.attention.head_count", -1, &c->n_heads));
  PAGEDKV_RETURN_IF_ERROR(
      ReadInt32(f, "llama.attention.head_count_kv", c->n_heads, &c->n_kv_heads));
  const GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
  if (emb == nullptr || emb->ne.size() != 2) {
    return Bad(f, "tensor 'token_embd.weight' is missing or not 2-D");
  }
  PAGEDKV_RETURN_IF_ERROR(ReadInt32(f, "llama.vocab_size", emb->ne[1], &c->vocab_size));
  if (c->vocab_size != emb->ne[1]) {
    return Bad(f, absl::StrCat("key 'llama.vocab_size' = ", c->vocab_size,
                               " but tensor 'token_embd.weight' has ", emb->ne[1], " rows"));
  }
  return ReadHeadDim(f, c);
}

// Layers of a sliding_window_pattern, as llama.cpp reads it: a bool array (one per layer, true:
// windowed) or an integer period N (llama_hparams::set_swa_pattern: layer l is windowed iff N == 0
// or l % N < N - 1, so the last layer of each period has full attention).
absl::StatusOr<std::vector<bool>> ReadSwaPattern(const GgufFile& f, const std::string& key,
                                                 int32_t n_layers) {
  const GgufValue* v = f.Find(key);
  std::vector<bool> windowed(static_cast<size_t>(n_layers), true);
  if (v == nullptr) return windowed;  // no pattern: every layer
  if (v->type == GgufValueType::kArray) {
    PAGEDKV_ASSIGN_OR_RETURN(const std::vector<GgufValue>* a,
                             f.GetArray(key, GgufValueType::kBool));
    if (a->size() != windowed.size()) {
      return Bad(
          f, absl::StrCat("key '", key, "' has ", a->size(),
                          " entries; it must have one per layer (block_count = ", n_layers, ")"));
    }
    for (size_t l = 0; l < a->size(); ++l) windowed[l] = (*a)[l].u != 0;
    return windowed;
  }
  PAGEDKV_ASSIGN_OR_RETURN(int64_t period, f.GetInt(key));
  if (period < 0 || period > INT32_MAX) {
    return Bad(f, absl::StrCat("key '", key, "' = ", period,
                               " must be a period >= 0 or a bool array (one per layer)"));
  }
  for (int64_t l = 0; l < n_layers; ++l) {
    windowed[static_cast<size_t>(l)] = period == 0 || l % period < period - 1;
  }
  return windowed;
}

// llama.attention.sliding_window (absent or 0: none) and its per-layer pattern -> layer_window.
absl::Status ReadSlidingWindow(const GgufFile& f, ModelConfig* c) {
  const std::string key = "llama.attention.sliding_window";
  if (f.Find(key) == nullptr) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(int64_t window, f.GetInt(key));
  if (window < 0 || window > INT32_MAX) {
    return Bad(f, absl::StrCat("key '", key, "' = ", window, " must be in [0, 2^31) (0: none)"));
  }
  if (window == 0) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(
      std::vector<bool> windowed,
      ReadSwaPattern(f, "llama.attention.sliding_window_pattern", c->n_layers));
  c->layer_window.assign(windowed.size(), 0);
  for (size_t l = 0; l < windowed.size(); ++l) {
    if (windowed[l]) c->layer_window[l] = static_cast<int32_t>(window);
  }
  if (!c->HasSlidingWindow()) c->layer_window.clear();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ReadGgufLlamaConfig(const GgufFile& f) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (arch != "llama") {
    return Bad(f, absl::StrCat("key 'general.architecture' = '", arch,
                               "' is not supported (only 'llama' is)"));
  }
  ModelConfig c;
  PAGEDKV_RETURN_IF_ERROR(ReadShape(f, &c));
  PAGEDKV_RETURN_IF_ERROR(ReadSlidingWindow(f, &c));
  const int32_t hd = c.head_dim();
  PAGEDKV_ASSIGN_OR_RETURN(double eps,
                           OptionalFloat(f, "llama.attention.layer_norm_rms_epsilon", 1e-5));
  c.rms_norm_eps = static_cast<float>(eps);
  RopeConfig rope;
  rope.head_dim = hd;
  rope.layout = RopeLayout::kHalfSplit;  // after UnpermuteQk
  PAGEDKV_ASSIGN_OR_RETURN(rope.base, OptionalFloat(f, "llama.rope.freq_base", 10000.0));
  rope.max_position_embeddings = c.seq_len;
  PAGEDKV_RETURN_IF_ERROR(ReadRopeScaling(f, &rope));
  c.rope_base = static_cast<float>(rope.base);
  c.rope = rope;
  c.shared_classifier = f.FindTensor("output.weight") == nullptr;
  PAGEDKV_RETURN_IF_ERROR(ReadTokenIds(f, &c));
  absl::Status valid = c.Validate();
  if (!valid.ok()) return Bad(f, std::string(valid.message()));
  return c;
}

namespace {

template <typename T>
void UnpermuteRows(int64_t rows, int64_t width, int32_t head_dim, T* w) {
  std::vector<T> head(static_cast<size_t>(head_dim * width));
  const int32_t half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; ++h) {
    T* base = w + h * head_dim * width;
    for (int32_t i = 0; i < half; ++i) {
      for (int32_t s = 0; s < 2; ++s) {
        const T* src = base + (2 * i + s) * width;
        std::copy(src, src + width, head.data() + (s * half + i) * width);
      }
    }
    std::copy(head.begin(), head.end(), base);
  }
}

}  // namespace

void UnpermuteQk(int64_t rows, int64_t cols, int32_t head_dim, float* w) {
  UnpermuteRows(rows, cols, head_dim, w);
}

void UnpermuteQkRows(int64_t rows, int64_t row_bytes, int32_t head_dim, unsigned char* w) {
  UnpermuteRows(rows, row_bytes, head_dim, w);
}

namespace {

// The type a ggml type stays in with native storage; kF32 when it is converted.
WeightType NativeTypeOf(uint32_t ggml_type) {
  switch (ggml_type) {
    case 1:
      return WeightType::kF16;
    case 2:
      return WeightType::kQ4_0;
    case 3:
      return WeightType::kQ4_1;
    case 8:
      return WeightType::kQ8_0;
    case 12:
      return WeightType::kQ4_K;
    case 14:
      return WeightType::kQ6_K;
    case 30:
      return WeightType::kBF16;
    default:
      return WeightType::kF32;
  }
}

// Dequantizes tensors into a growing fp32 buffer in llama2.c payload order, recording names;
// with native storage, matrices of a block type kernels take keep their bytes instead.
class GgufPacker {
 public:
  GgufPacker(const GgufFile& f, WeightStorage storage, NativeWeightParts* out)
      : f_(f), storage_(storage), out_(out) {}

  // Appends tensor `name` of row-major shape [rows, cols] (GGUF ne = {cols, rows}); with
  // qk_head_dim > 0 its rows are un-permuted (UnpermuteQk). `matrix`: one of the payload's
  // matrices (its type is recorded).
  absl::Status Append(const std::string& name, int64_t rows, int64_t cols, int32_t qk_head_dim,
                      bool matrix) {
    const GgufTensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return Bad(f_, absl::StrCat("tensor '", name, "' is missing"));
    const bool vec = rows == 1;
    if ((vec && (t->ne.size() != 1 || t->ne[0] != cols)) ||
        (!vec && (t->ne.size() != 2 || t->ne[0] != cols || t->ne[1] != rows))) {
      return Bad(f_, absl::StrFormat("tensor '%s' has ne = {%s}, expected {%d%s}", name,
                                     absl::StrJoin(t->ne, ", "), cols,
                                     vec ? "" : absl::StrCat(", ", rows)));
    }
    used_.insert(name);
    const WeightType native =
        storage_ == WeightStorage::kNative && matrix ? NativeTypeOf(t->type) : WeightType::kF32;
    if (matrix) {
      out_->matrix_types.push_back(native);
      out_->in_place.push_back(nullptr);
    }
    if (native != WeightType::kF32 && cols % QuantBlockValuesOf(native) == 0) {
      return AppendNative(*t, name, rows, cols, qk_head_dim);
    }
    if (matrix) out_->matrix_types.back() = WeightType::kF32;
    std::vector<float>& payload = out_->payload;
    const size_t at = payload.size();
    payload.resize(at + static_cast<size_t>(t->num_elements));
    float* dst = payload.data() + at;
    PAGEDKV_RETURN_IF_ERROR(f_.ReadF32(*t, dst));
    PAGEDKV_RETURN_IF_ERROR(CheckFinite(name, dst, t->num_elements, 0));
    if (qk_head_dim > 0) UnpermuteQk(rows, cols, qk_head_dim, dst);
    return absl::OkStatus();
  }
  void Pad(int64_t n) { out_->payload.resize(out_->payload.size() + static_cast<size_t>(n), 0.0f); }
  bool Used(const std::string& name) const { return used_.contains(name); }

  // Gives back the pages of the file's mapping outside the matrices kept in place: the header
  // (parsed into the GgufFile at Open) and the tensors converted or copied above are not read
  // there again (a later read maps them back, the same bytes).
  absl::Status ReleaseAllButKept() {
    std::sort(kept_.begin(), kept_.end(),
              [](std::string_view a, std::string_view b) { return a.data() < b.data(); });
    const std::string_view file = f_.bytes();
    const char* from = file.data();
    for (std::string_view k : kept_) {
      PAGEDKV_RETURN_IF_ERROR(ReleaseMappedPages(from, static_cast<size_t>(k.data() - from)));
      from = k.data() + k.size();
    }
    return ReleaseMappedPages(from, static_cast<size_t>(file.data() + file.size() - from));
  }

 private:
  absl::Status CheckFinite(const std::string& name, const float* v, int64_t n, int64_t first) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i])) {
        return Bad(f_, absl::StrCat("tensor '", name, "' holds a non-finite value at element ",
                                    first + i));
      }
    }
    return absl::OkStatus();
  }

  // Keeps the tensor's blocks, checking each row's values are finite (decoded one row at a time):
  // in place in the file's mapping, or copied into `native` when its rows are un-permuted.
  absl::Status AppendNative(const GgufTensorInfo& t, const std::string& name, int64_t rows,
                            int64_t cols, int32_t qk_head_dim) {
    const std::string_view bytes = f_.TensorBytes(t);
    const auto row_bytes = static_cast<size_t>(bytes.size() / static_cast<size_t>(rows));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      PAGEDKV_RETURN_IF_ERROR(DequantizeGguf(
          t.type, bytes.substr(static_cast<size_t>(r) * row_bytes, row_bytes), cols, row.data()));
      PAGEDKV_RETURN_IF_ERROR(CheckFinite(name, row.data(), cols, r * cols));
    }
    if (qk_head_dim == 0) {
      out_->in_place.back() = reinterpret_cast<const unsigned char*>(bytes.data());
      kept_.push_back(bytes);
      return absl::OkStatus();
    }
    std::vector<unsigned char>& native = out_->native;
    const size_t at = native.size();
    native.insert(native.end(), bytes.begin(), bytes.end());
    UnpermuteQkRows(rows, static_cast<int64_t>(row_bytes), qk_head_dim, native.data() + at);
    return absl::OkStatus();
  }

  const GgufFile& f_;
  WeightStorage storage_;
  NativeWeightParts* out_;
  absl::flat_hash_set<std::string> used_;
  std::vector<std::string_view> kept_;  // the bytes of the matrices kept in place
};

struct LayerKind {
  const char* name;
  int64_t rows, cols;
  bool qk;  // un-permute its rows
};

absl::Status PackPayload(const ModelConfig& c, GgufPacker& p) {
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), v = c.vocab_size;
  PAGEDKV_RETURN_IF_ERROR(p.Append("token_embd.weight", v, d, 0, /*matrix=*/true));
  const LayerKind kinds[] = {
      {"attn_norm", 1, d, false}, {"attn_q", q, d, true},       {"attn_k", kv, d, true},
      {"attn_v", kv, d, false},   {"attn_output", d, q, false}, {"ffn_norm", 1, d, false},
      {"ffn_gate", h, d, false},  {"ffn_down", d, h, false},    {"ffn_up", h, d, false}};
  for (const LayerKind& k : kinds) {
    for (int32_t l = 0; l < c.n_layers; ++l) {
      PAGEDKV_RETURN_IF_ERROR(p.Append(absl::StrCat("blk.", l, ".", k.name, ".weight"), k.rows,
                                       k.cols, k.qk ? c.head_dim() : 0, k.rows > 1));
    }
  }
  PAGEDKV_RETURN_IF_ERROR(p.Append("output_norm.weight", 1, d, 0, /*matrix=*/false));
  p.Pad(int64_t{c.seq_len} * c.head_dim());  // llama2.c's freq_cis tables (unused)
  if (!c.shared_classifier) {
    PAGEDKV_RETURN_IF_ERROR(p.Append("output.weight", v, d, 0, /*matrix=*/true));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeights> LoadGgufWeights(const GgufFile& f, WeightStorage storage) {
  PAGEDKV_ASSIGN_OR_RETURN(ModelConfig c, ReadGgufLlamaConfig(f));
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    return Bad(f, "tensor 'rope_freqs.weight' (Llama-3 RoPE frequency factors) is not supported");
  }
  NativeWeightParts parts;
  if (storage == WeightStorage::kF32) {
    parts.payload.reserve(static_cast<size_t>(ModelWeights::PayloadSize(c)));
  }
  GgufPacker packer(f, storage, &parts);
  PAGEDKV_RETURN_IF_ERROR(PackPayload(c, packer));
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!packer.Used(t.name)) {
      return Bad(f, absl::StrCat("tensor '", t.name,
                                 "' is not part of a llama model (unsupported "
                                 "weights)"));
    }
  }
  if (storage == WeightStorage::kF32)
    return ModelWeights::FromParts(c, std::move(parts.payload), {});
  parts.mapping = f.mapping();  // the in-place matrices' rows
  PAGEDKV_ASSIGN_OR_RETURN(ModelWeights weights,
                           ModelWeights::FromNativeParts(c, std::move(parts)));
  PAGEDKV_RETURN_IF_ERROR(packer.ReleaseAllButKept());
  return weights;
}

}  // namespace pagedkv::model_internal
