// Copyright 2026 The pagedkv Authors.
//
// ModelWeights: the llama2.c legacy (v0) checkpoint loader.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "engine/model/formats/file_bytes.h"
#include "engine/model/formats/mapped_file.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

static_assert(std::endian::native == std::endian::little,
              "llama2.c checkpoints are little-endian; a big-endian host needs byte swapping");

constexpr size_t kHeaderInts = 7;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);
// llama2.c's newer export formats (version >= 1) start with this magic ("ak42").
constexpr uint32_t kLlama2cMagic = 0x616b3432;

// Sizes (in floats) of the payload's tensors, in file order.
struct PayloadLayout {
  int64_t token_embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis_real,
      freq_cis_imag, wcls;
  int64_t Total() const {
    return token_embedding + rms_att + wq + wk + wv + wo + rms_ffn + w1 + w2 + w3 + rms_final +
           freq_cis_real + freq_cis_imag + wcls;
  }
};

PayloadLayout LayoutOf(const ModelConfig& c) {
  const int64_t d = c.dim, h = c.hidden_dim, l = c.n_layers, v = c.vocab_size;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  const int64_t freq = int64_t{c.seq_len} * c.head_dim() / 2;
  return PayloadLayout{.token_embedding = v * d,
                       .rms_att = l * d,
                       .wq = l * q * d,
                       .wk = l * kv * d,
                       .wv = l * kv * d,
                       .wo = l * d * q,
                       .rms_ffn = l * d,
                       .w1 = l * h * d,
                       .w2 = l * d * h,
                       .w3 = l * h * d,
                       .rms_final = d,
                       .freq_cis_real = freq,
                       .freq_cis_imag = freq,
                       .wcls = c.shared_classifier ? 0 : v * d};
}

// splitmix64: a tiny, portable generator so Random() gives the same weights everywhere.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Symmetric() { return static_cast<float>(Next() >> 40) / 8388608.0f - 1.0f; }

 private:
  uint64_t state_;
};

}  // namespace

int64_t ModelWeights::PayloadSize(const ModelConfig& config) { return LayoutOf(config).Total(); }

namespace {

// Hands out the payload's tensors in file order: fp32 pointers, or block rows for the matrices
// whose type (types, in payload order; past its end kF32) is a block format.
class TensorCursor {
 public:
  // in_place: empty, or per matrix its rows in place (null: in `bytes`).
  TensorCursor(const float* floats, const unsigned char* bytes,
               const std::vector<WeightType>& types,
               const std::vector<const unsigned char*>& in_place)
      : floats_(floats), bytes_(bytes), types_(types), in_place_(in_place) {}
  const float* Floats(int64_t n) {
    const float* p = floats_;
    floats_ += n;
    return p;
  }
  // A [rows, cols] matrix: its fp32 pointer, or null with *native set.
  const float* Matrix(int64_t rows, int64_t cols, NativeMatrix* native) {
    const size_t i = next_++;
    const WeightType t = i < types_.size() ? types_[i] : WeightType::kF32;
    if (t == WeightType::kF32) return Floats(rows * cols);
    native->type = t;
    if (i < in_place_.size() && in_place_[i] != nullptr) {
      native->data = in_place_[i];
      return nullptr;
    }
    native->data = bytes_;
    bytes_ += rows * WeightRowBytes(t, cols);
    return nullptr;
  }

 private:
  const float* floats_;
  const unsigned char* bytes_;
  const std::vector<WeightType>& types_;
  const std::vector<const unsigned char*>& in_place_;
  size_t next_ = 0;
};

struct MatrixShape {
  int64_t rows, cols;
};

// The payload's matrices in file order (see NativeWeightParts::matrix_types).
std::vector<MatrixShape> MatrixShapes(const ModelConfig& c) {
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  std::vector<MatrixShape> out = {{c.vocab_size, d}};
  for (MatrixShape m :
       {MatrixShape{q, d}, MatrixShape{kv, d}, MatrixShape{kv, d}, MatrixShape{d, q},
        MatrixShape{h, d}, MatrixShape{d, h}, MatrixShape{h, d}}) {
    out.insert(out.end(), static_cast<size_t>(c.n_layers), m);
  }
  if (!c.shared_classifier) out.push_back({c.vocab_size, d});
  return out;
}

}  // namespace

void ModelWeights::BindPointers() {
  const ModelConfig& c = config_;
  const PayloadLayout s = LayoutOf(c);
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  const auto layers = static_cast<size_t>(c.n_layers);
  TensorCursor cur(payload_.data(), native_.data(), matrix_types_, in_place_);
  native_token_embedding_ = {};
  token_embedding_ = cur.Matrix(c.vocab_size, d, &native_token_embedding_);
  layers_.assign(layers, LayerWeights{});
  const float* rms_att = cur.Floats(s.rms_att);
  for (size_t i = 0; i < layers; ++i) layers_[i].rms_att = rms_att + i * d;
  for (LayerWeights& lw : layers_) lw.wq = cur.Matrix(q, d, &lw.native_wq);
  for (LayerWeights& lw : layers_) lw.wk = cur.Matrix(kv, d, &lw.native_wk);
  for (LayerWeights& lw : layers_) lw.wv = cur.Matrix(kv, d, &lw.native_wv);
  for (LayerWeights& lw : layers_) lw.wo = cur.Matrix(d, q, &lw.native_wo);
  const float* rms_ffn = cur.Floats(s.rms_ffn);
  for (size_t i = 0; i < layers; ++i) layers_[i].rms_ffn = rms_ffn + i * d;
  for (LayerWeights& lw : layers_) lw.w1 = cur.Matrix(h, d, &lw.native_w1);
  for (LayerWeights& lw : layers_) lw.w2 = cur.Matrix(d, h, &lw.native_w2);
  for (LayerWeights& lw : layers_) lw.w3 = cur.Matrix(h, d, &lw.native_w3);
  rms_final_ = cur.Floats(s.rms_final);
  cur.Floats(s.freq_cis_real + s.freq_cis_imag);
  native_classifier_ = native_token_embedding_;
  classifier_ =
      c.shared_classifier ? token_embedding_ : cur.Matrix(c.vocab_size, d, &native_classifier_);
  for (size_t i = 0; c.qkv_bias && i < layers; ++i) {
    const float* b = qkv_bias_.data() + i * (q + 2 * kv);
    layers_[i].bq = b;
    layers_[i].bk = b + q;
    layers_[i].bv = b + q + kv;
  }
}

namespace {

// The fp32 payload floats and `native` bytes that `parts`' types imply (in-place matrices take
// neither); InvalidArgument for a type a matrix cannot have or an in_place of the wrong length.
absl::Status NativePartSizes(const ModelConfig& config, const NativeWeightParts& parts,
                             int64_t* floats, int64_t* bytes) {
  const std::vector<MatrixShape> shapes = MatrixShapes(config);
  if (parts.matrix_types.size() != shapes.size() ||
      (!parts.in_place.empty() && parts.in_place.size() != shapes.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FromNativeParts: %s has %d matrices, got %d types and %d in-place entries",
        config.ToString(), shapes.size(), parts.matrix_types.size(), parts.in_place.size()));
  }
  *floats = ModelWeights::PayloadSize(config);
  *bytes = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const WeightType t = parts.matrix_types[i];
    const bool in_place = !parts.in_place.empty() && parts.in_place[i] != nullptr;
    if (t == WeightType::kF32 && !in_place) continue;
    if (t == WeightType::kF32 || static_cast<int>(t) >= kWeightTypeCount ||
        shapes[i].cols % QuantBlockValuesOf(t) != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("FromNativeParts: matrix %d (%d x %d) cannot be kept in block type %d", i,
                          shapes[i].rows, shapes[i].cols, static_cast<int>(t)));
    }
    *floats -= shapes[i].rows * shapes[i].cols;
    if (!in_place) *bytes += shapes[i].rows * WeightRowBytes(t, shapes[i].cols);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeights> ModelWeights::FromNativeParts(const ModelConfig& config,
                                                           NativeWeightParts parts) {
  PAGEDKV_RETURN_IF_ERROR(config.Validate());
  int64_t floats = 0, bytes = 0;
  PAGEDKV_RETURN_IF_ERROR(NativePartSizes(config, parts, &floats, &bytes));
  if (static_cast<int64_t>(parts.payload.size()) != floats ||
      static_cast<int64_t>(parts.native.size()) != bytes ||
      static_cast<int64_t>(parts.qkv_bias.size()) != QkvBiasSize(config)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "FromNativeParts: %s with these types needs %d payload floats, %d native bytes and %d "
        "bias floats; got %d, %d and %d",
        config.ToString(), floats, bytes, QkvBiasSize(config), parts.payload.size(),
        parts.native.size(), parts.qkv_bias.size()));
  }
  const bool any_in_place = std::any_of(parts.in_place.begin(), parts.in_place.end(),
                                        [](const unsigned char* p) { return p != nullptr; });
  if (any_in_place && parts.mapping == nullptr) {
    return absl::InvalidArgumentError(
        "FromNativeParts: in-place matrices need the mapping that keeps them alive");
  }
  ModelWeights weights;
  weights.config_ = config;
  weights.payload_ = std::move(parts.payload);
  weights.qkv_bias_ = std::move(parts.qkv_bias);
  weights.native_ = std::move(parts.native);
  weights.matrix_types_ = std::move(parts.matrix_types);
  if (any_in_place) {
    weights.in_place_ = std::move(parts.in_place);
    weights.mapping_ = std::move(parts.mapping);
  }
  weights.BindPointers();
  return weights;
}

int64_t ModelWeights::weight_bytes() const {
  return static_cast<int64_t>((payload_.size() + qkv_bias_.size()) * sizeof(float) +
                              native_.size()) +
         in_place_bytes();
}

int64_t ModelWeights::in_place_bytes() const {
  const std::vector<MatrixShape> shapes = MatrixShapes(config_);
  int64_t bytes = 0;
  for (size_t i = 0; i < in_place_.size(); ++i) {
    if (in_place_[i] == nullptr) continue;
    bytes += shapes[i].rows * WeightRowBytes(matrix_types_[i], shapes[i].cols);
  }
  return bytes;
}

absl::StatusOr<bool> ModelWeights::ReleaseInPlaceRows(const void* data, int64_t bytes) const {
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const std::vector<MatrixShape> shapes = MatrixShapes(config_);
  for (size_t i = 0; i < in_place_.size() && data != nullptr && bytes >= 0; ++i) {
    const auto rows = reinterpret_cast<uintptr_t>(in_place_[i]);
    if (rows == 0) continue;
    const auto size =
        static_cast<uintptr_t>(shapes[i].rows * WeightRowBytes(matrix_types_[i], shapes[i].cols));
    if (begin < rows || begin - rows > size ||
        static_cast<uintptr_t>(bytes) > size - (begin - rows)) {
      continue;
    }
    PAGEDKV_RETURN_IF_ERROR(model_internal::ReleaseMappedPages(data, static_cast<size_t>(bytes)));
    return true;
  }
  return false;
}

int64_t ModelWeights::QkvBiasSize(const ModelConfig& config) {
  return config.qkv_bias ? int64_t{config.n_layers} * (config.q_dim() + 2 * config.kv_dim()) : 0;
}

absl::StatusOr<ModelWeights> ModelWeights::FromParts(const ModelConfig& config,
                                                     std::vector<float> payload,
                                                     std::vector<float> qkv_bias) {
  PAGEDKV_RETURN_IF_ERROR(config.Validate());
  if (static_cast<int64_t>(qkv_bias.size()) != QkvBiasSize(config)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("q/k/v biases for %s must hold %d floats, got %d", config.ToString(),
                        QkvBiasSize(config), qkv_bias.size()));
  }
  ModelConfig payload_config = config;
  payload_config.qkv_bias = false;
  PAGEDKV_ASSIGN_OR_RETURN(ModelWeights weights,
                           FromLlama2cPayload(payload_config, std::move(payload)));
  weights.config_ = config;
  weights.qkv_bias_ = std::move(qkv_bias);
  weights.BindPointers();
  return weights;
}

absl::StatusOr<ModelWeights> ModelWeights::FromLlama2cPayload(const ModelConfig& config,
                                                              std::vector<float> payload) {
  PAGEDKV_RETURN_IF_ERROR(config.Validate());
  if (config.qkv_bias) {
    return absl::InvalidArgumentError(
        "FromLlama2cPayload: the config has q/k/v biases; pass them with FromParts");
  }
  const int64_t expected = PayloadSize(config);
  if (static_cast<int64_t>(payload.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrFormat("llama2.c payload for %s must hold %d floats, got %d", config.ToString(),
                        expected, payload.size()));
  }
  ModelWeights weights;
  weights.config_ = config;
  weights.payload_ = std::move(payload);
  weights.BindPointers();
  return weights;
}

absl::StatusOr<ModelWeights> ModelWeights::ParseLlama2c(std::string_view bytes,
                                                        std::string_view name) {
  if (bytes.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint '%s' is %d bytes, shorter than the %d-byte llama2.c header (truncated?)", name,
        bytes.size(), kHeaderBytes));
  }
  int32_t header[kHeaderInts];
  std::memcpy(header, bytes.data(), kHeaderBytes);
  if (static_cast<uint32_t>(header[0]) == kLlama2cMagic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint '%s' is a llama2.c version-1+ export (magic 'ak42'); only the legacy v0 "
        "format is supported: export it with `export.py --version 0`",
        name));
  }
  ModelConfig config;
  config.dim = header[0];
  config.hidden_dim = header[1];
  config.n_layers = header[2];
  config.n_heads = header[3];
  config.n_kv_heads = header[4];
  if (header[5] == INT32_MIN) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint '%s' has an impossible header: vocab_size %d", name, header[5]));
  }
  config.shared_classifier = header[5] > 0;
  config.vocab_size = header[5] < 0 ? -header[5] : header[5];
  config.seq_len = header[6];
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint '%s' has an impossible header (dim=%d hidden_dim=%d n_layers=%d n_heads=%d "
        "n_kv_heads=%d vocab_size=%d seq_len=%d): %s",
        name, header[0], header[1], header[2], header[3], header[4], header[5], header[6],
        s.message()));
  }
  const int64_t payload_floats = PayloadSize(config);
  const int64_t expected_bytes = static_cast<int64_t>(kHeaderBytes) + payload_floats * 4;
  const int64_t actual_bytes = static_cast<int64_t>(bytes.size());
  if (actual_bytes < expected_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint '%s' is truncated: its header (%s) implies %d bytes, the file has %d", name,
        config.ToString(), expected_bytes, actual_bytes));
  }
  if (actual_bytes > expected_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "checkpoint '%s' has %d bytes after the %d that its header (%s) implies: not a legacy "
        "llama2.c checkpoint, or a wrong header",
        name, actual_bytes - expected_bytes, expected_bytes, config.ToString()));
  }
  std::vector<float> payload(static_cast<size_t>(payload_floats));
  std::memcpy(payload.data(), bytes.data() + kHeaderBytes, payload.size() * sizeof(float));
  for (size_t i = 0; i < payload.size(); ++i) {
    if (!std::isfinite(payload[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("checkpoint '%s' is corrupt: weight %d (byte offset %d) is %f", name, i,
                          kHeaderBytes + i * sizeof(float), payload[i]));
    }
  }
  return FromLlama2cPayload(config, std::move(payload));
}

absl::StatusOr<ModelWeights> ModelWeights::LoadLlama2c(const std::string& path) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string bytes, model_internal::ReadFileBytes(path, "checkpoint"));
  return ParseLlama2c(bytes, path);
}

absl::StatusOr<ModelWeights> ModelWeights::Random(const ModelConfig& config,
                                                  const RandomWeightsOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(config.Validate());
  const PayloadLayout s = LayoutOf(config);
  std::vector<float> payload;
  payload.reserve(static_cast<size_t>(s.Total()));
  SplitMix64 rng(options.seed);
  auto fill = [&](int64_t count, float scale, float offset) {
    for (int64_t i = 0; i < count; ++i) payload.push_back(offset + scale * rng.Symmetric());
  };
  const float in_dim = options.projection_gain / std::sqrt(static_cast<float>(config.dim));
  const float in_hidden =
      options.projection_gain / std::sqrt(static_cast<float>(config.hidden_dim));
  fill(s.token_embedding, options.embedding_scale, 0.0f);
  fill(s.rms_att, 0.1f, 1.0f);
  fill(s.wq, in_dim, 0.0f);
  fill(s.wk, in_dim, 0.0f);
  fill(s.wv, in_dim, 0.0f);
  fill(s.wo, options.projection_gain / std::sqrt(static_cast<float>(config.q_dim())), 0.0f);
  fill(s.rms_ffn, 0.1f, 1.0f);
  fill(s.w1, in_dim, 0.0f);
  fill(s.w2, in_hidden, 0.0f);
  fill(s.w3, in_dim, 0.0f);
  fill(s.rms_final, 0.1f, 1.0f);
  // llama2.c's freq_cis tables for base 10000 (unused by the runner, written for fidelity).
  const int half = config.head_dim() / 2;
  for (int part = 0; part < 2; ++part) {
    for (int pos = 0; pos < config.seq_len; ++pos) {
      for (int i = 0; i < half; ++i) {
        const double freq =
            std::pow(static_cast<double>(config.rope_base), -2.0 * i / config.head_dim());
        const double angle = pos * freq;
        payload.push_back(static_cast<float>(part == 0 ? std::cos(angle) : std::sin(angle)));
      }
    }
  }
  fill(s.wcls, options.embedding_scale, 0.0f);
  std::vector<float> bias;
  bias.reserve(static_cast<size_t>(QkvBiasSize(config)));
  for (int64_t i = 0; i < QkvBiasSize(config); ++i) bias.push_back(0.1f * rng.Symmetric());
  return FromParts(config, std::move(payload), std::move(bias));
}

}  // namespace pagedkv
