// Copyright 2026 The pagedkv Authors.
#include "engine/model/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// Capacity for `needed` elements when growing from `current`: at least double.
int64_t Grow(int64_t current, int64_t needed) {
  return std::max({needed, current * 2, int64_t{16}});
}

absl::StatusOr<DeviceBuffer> Upload(Backend& backend, const void* host, size_t bytes) {
  PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Create(backend, bytes));
  PAGEDKV_RETURN_IF_ERROR(backend.CopyToDevice(buffer.data(), host, bytes));
  return buffer;
}

template <typename T>
absl::Status CopySpan(Backend& backend, const DeviceBuffer& dst, absl::Span<const T> src) {
  return backend.CopyToDevice(dst.data(), src.data(), src.size() * sizeof(T));
}

}  // namespace

RopeConfig DefaultRopeConfig(const ModelConfig& model) {
  RopeConfig rope;
  rope.head_dim = model.head_dim();
  rope.rotary_dim = 0;
  rope.base = model.rope_base;
  rope.layout = RopeLayout::kInterleaved;
  rope.scaling = RopeScaling::kNone;
  rope.max_position_embeddings = model.seq_len;
  return rope;
}

int32_t NumToRecompute(double fraction, int32_t n) {
  const double want = std::ceil(fraction * static_cast<double>(n));
  return static_cast<int32_t>(std::clamp(want, 0.0, static_cast<double>(n)));
}

std::vector<int32_t> MostDeviatingTokens(std::span<const float> k_a, std::span<const float> v_a,
                                         std::span<const float> k_b, std::span<const float> v_b,
                                         int64_t width, int32_t count) {
  const size_t w = static_cast<size_t>(width);
  const size_t n = k_a.size() / w;
  std::vector<std::pair<double, int32_t>> deviation;
  deviation.reserve(n);
  for (size_t j = 0; j < n; ++j) {
    double sum = 0.0;
    for (size_t e = j * w; e < (j + 1) * w; ++e) {
      const double dk = double{k_a[e]} - k_b[e];
      const double dv = double{v_a[e]} - v_b[e];
      sum += dk * dk + dv * dv;
    }
    deviation.emplace_back(sum, static_cast<int32_t>(j));
  }
  const auto pick = std::min(n, static_cast<size_t>(std::max(count, 0)));
  std::partial_sort(deviation.begin(), deviation.begin() + static_cast<std::ptrdiff_t>(pick),
                    deviation.end(), [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  std::vector<int32_t> picked;
  picked.reserve(pick);
  for (size_t j = 0; j < pick; ++j) picked.push_back(deviation[j].second);
  std::sort(picked.begin(), picked.end());
  return picked;
}

int64_t ContextLengthFor(const ModelConfig& model, const RopeConfig& rope) {
  switch (rope.scaling) {
    case RopeScaling::kNone:
      return model.seq_len;
    case RopeScaling::kLinear:
    case RopeScaling::kNtk:
      return static_cast<int64_t>(std::floor(model.seq_len * rope.factor));
    case RopeScaling::kDynamicNtk:
      return std::max<int64_t>(model.seq_len, rope.dynamic_seq_len);
    case RopeScaling::kYarn:
    case RopeScaling::kLlama3:
      return rope.max_position_embeddings;
  }
  return model.seq_len;
}

absl::StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(
    std::shared_ptr<const ModelWeights> weights, const ModelRunnerOptions& options) {
  if (weights == nullptr) return absl::InvalidArgumentError("ModelRunner: weights are null");
  std::unique_ptr<ModelRunner> runner(new ModelRunner());
  runner->weights_ = std::move(weights);
  runner->options_ = options;
  PAGEDKV_RETURN_IF_ERROR(runner->Init());
  return runner;
}

ModelRunner::~ModelRunner() = default;

absl::Status ModelRunner::Init() {
  const ModelConfig& c = weights_->config();
  if (options_.num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelRunnerOptions.num_blocks must be positive, got ", options_.num_blocks));
  }
  if (options_.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelRunnerOptions.block_size must be positive, got ", options_.block_size));
  }
  if (!IsValidDType(options_.kv_dtype)) {
    return absl::InvalidArgumentError("ModelRunnerOptions.kv_dtype is not a DType value");
  }
  rope_config_ = options_.rope.value_or(DefaultRopeConfig(c));
  if (rope_config_.head_dim != c.head_dim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelRunnerOptions.rope.head_dim = ", rope_config_.head_dim,
                     " differs from the model's head_dim ", c.head_dim()));
  }
  if (absl::Status s = rope_config_.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("ModelRunnerOptions.rope: ", s.message()));
  }
  context_length_ = ContextLengthFor(c, rope_config_);
  PAGEDKV_ASSIGN_OR_RETURN(backend_, CreateBackend(options_.backend));

  const int64_t table_positions = options_.rope_table_positions > 0
                                      ? options_.rope_table_positions
                                      : std::max<int64_t>(context_length_, 1);
  PAGEDKV_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Create(rope_config_, table_positions));
  rope_table_.emplace(std::move(table));
  rope_view_ = rope_table_->View();
  if (!backend_->host_memory()) {
    PAGEDKV_ASSIGN_OR_RETURN(rope_cos_sin_, Upload(*backend_, rope_table_->cos_sin().data(),
                                                   rope_table_->cos_sin().size() * sizeof(float)));
    PAGEDKV_ASSIGN_OR_RETURN(rope_inv_freq_,
                             Upload(*backend_, rope_table_->inv_freq().data(),
                                    rope_table_->inv_freq().size() * sizeof(double)));
    rope_view_.cos_sin = rope_cos_sin_.as<const float>();
    rope_view_.inv_freq = rope_inv_freq_.as<const double>();
  }

  // Weights: used in place on a host backend, uploaded tensor by tensor otherwise.
  auto place = [&](const float* host, int64_t count) -> absl::StatusOr<const float*> {
    if (backend_->host_memory()) return host;
    PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                             Upload(*backend_, host, static_cast<size_t>(count) * sizeof(float)));
    const float* ptr = buffer.as<const float>();
    uploaded_weights_.push_back(std::move(buffer));
    return ptr;
  };
  const int64_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim();
  PAGEDKV_ASSIGN_OR_RETURN(token_embedding_,
                           place(weights_->token_embedding(), int64_t{c.vocab_size} * d));
  PAGEDKV_ASSIGN_OR_RETURN(rms_final_, place(weights_->rms_final(), d));
  if (c.shared_classifier) {
    classifier_ = token_embedding_;
  } else {
    PAGEDKV_ASSIGN_OR_RETURN(classifier_, place(weights_->classifier(), int64_t{c.vocab_size} * d));
  }
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& src = weights_->layer(l);
    LayerWeights& dst = layers_[static_cast<size_t>(l)];
    PAGEDKV_ASSIGN_OR_RETURN(dst.rms_att, place(src.rms_att, d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wq, place(src.wq, d * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wk, place(src.wk, kv * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wv, place(src.wv, kv * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wo, place(src.wo, d * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.rms_ffn, place(src.rms_ffn, d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w1, place(src.w1, h * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w2, place(src.w2, d * h));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w3, place(src.w3, h * d));
  }

  // KV pages.
  kv_layouts_.resize(static_cast<size_t>(c.n_layers));
  kv_pages_.reserve(2 * static_cast<size_t>(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    PagedKvLayout layout{.k = nullptr,
                         .v = nullptr,
                         .dtype = options_.kv_dtype,
                         .num_blocks = options_.num_blocks,
                         .block_size = options_.block_size,
                         .num_kv_heads = c.n_kv_heads,
                         .head_dim = c.head_dim()};
    const auto bytes = static_cast<size_t>(layout.NumBytes());
    PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer k, DeviceBuffer::Create(*backend_, bytes));
    PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer v, DeviceBuffer::Create(*backend_, bytes));
    layout.k = k.data();
    layout.v = v.data();
    kv_pages_.push_back(std::move(k));
    kv_pages_.push_back(std::move(v));
    kv_layouts_[static_cast<size_t>(l)] = layout;
  }
  return absl::OkStatus();
}

int64_t ModelRunner::kv_cache_bytes() const {
  int64_t total = 0;
  for (const PagedKvLayout& layout : kv_layouts_) total += 2 * layout.NumBytes();
  return total;
}

absl::Status ModelRunner::ValidateInput(const ModelInput& in, const ForwardOptions& options) const {
  const ModelConfig& c = config();
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  if (in.positions.size() != in.token_ids.size() || in.slot_mapping.size() != in.token_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInput: token_ids, positions and slot_mapping must have equal sizes, got ",
        in.token_ids.size(), ", ", in.positions.size(), ", ", in.slot_mapping.size()));
  }
  if (in.query_start_loc.empty()) {
    return absl::InvalidArgumentError("ModelInput: query_start_loc needs num_seqs + 1 entries");
  }
  const auto num_seqs = static_cast<int64_t>(in.query_start_loc.size()) - 1;
  if (static_cast<int64_t>(in.kv_lens.size()) != num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("ModelInput: kv_lens has ", in.kv_lens.size(),
                                                   " entries for ", num_seqs, " sequences"));
  }
  if (in.max_blocks_per_seq < 0 ||
      static_cast<int64_t>(in.block_tables.size()) != num_seqs * in.max_blocks_per_seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelInput: block_tables has ", in.block_tables.size(),
                     " entries, expected num_seqs * max_blocks_per_seq = ", num_seqs, " * ",
                     in.max_blocks_per_seq));
  }
  if (in.query_start_loc.front() != 0 || in.query_start_loc.back() != num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInput: query_start_loc must run from 0 to the number of tokens ", num_tokens));
  }
  const int64_t num_slots = int64_t{options_.num_blocks} * options_.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const auto i = static_cast<size_t>(t);
    if (in.token_ids[i] < 0 || in.token_ids[i] >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: token_ids[", t,
                                                     "] = ", in.token_ids[i], " is outside [0, ",
                                                     c.vocab_size, ")"));
    }
    if (in.slot_mapping[i] < -1 || in.slot_mapping[i] >= num_slots) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: slot_mapping[", t,
                                                     "] = ", in.slot_mapping[i],
                                                     " is outside [-1, ", num_slots, ")"));
    }
  }
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int32_t begin = in.query_start_loc[static_cast<size_t>(s)];
    const int32_t end = in.query_start_loc[static_cast<size_t>(s) + 1];
    if (end < begin) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelInput: query_start_loc decreases at sequence ", s));
    }
    const int32_t kv_len = in.kv_lens[static_cast<size_t>(s)];
    const int64_t blocks_needed = (int64_t{kv_len} + options_.block_size - 1) / options_.block_size;
    if (kv_len < 1 || blocks_needed > in.max_blocks_per_seq) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModelInput: kv_lens[", s, "] = ", kv_len, " must be in [1, max_blocks_per_seq * ",
          "block_size = ", int64_t{in.max_blocks_per_seq} * options_.block_size, "]"));
    }
    const BlockId* table = in.block_tables.data() + s * in.max_blocks_per_seq;
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (table[b] < 0 || table[b] >= options_.num_blocks) {
        return absl::InvalidArgumentError(
            absl::StrCat("ModelInput: block table of sequence ", s, " entry ", b, " = ", table[b],
                         " is outside [0, ", options_.num_blocks, ")"));
      }
    }
    for (int32_t t = begin; t < end; ++t) {
      const int32_t pos = in.positions[static_cast<size_t>(t)];
      if (pos < 0 || pos >= kv_len) {
        return absl::InvalidArgumentError(absl::StrCat("ModelInput: positions[", t, "] = ", pos,
                                                       " must be in [0, kv_lens[", s,
                                                       "] = ", kv_len, ")"));
      }
      const int64_t slot = in.slot_mapping[static_cast<size_t>(t)];
      const int64_t expected = int64_t{table[pos / options_.block_size]} * options_.block_size +
                               pos % options_.block_size;
      if (slot != -1 && slot != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ModelInput: slot_mapping[", t, "] = ", slot, " disagrees with the block table of ",
            "sequence ", s, ", which puts position ", pos, " at slot ", expected));
      }
    }
  }
  for (size_t i = 0; i < in.logits_indices.size(); ++i) {
    if (in.logits_indices[i] < 0 || in.logits_indices[i] >= num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: logits_indices[", i,
                                                     "] = ", in.logits_indices[i],
                                                     " is outside [0, ", num_tokens, ")"));
    }
  }
  if (!options.sampling.empty() && options.sampling.size() != in.logits_indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardOptions: sampling has ", options.sampling.size(),
                     " entries, expected one per logits index (", in.logits_indices.size(), ")"));
  }
  for (size_t i = 0; i < options.sampling.size(); ++i) {
    const SamplingParams& p = options.sampling[i];
    if (!std::isfinite(p.temperature) || !(p.top_p > 0.0f && p.top_p <= 1.0f)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ForwardOptions: sampling[", i, "] needs a finite temperature and top_p in (0, 1]"));
    }
  }
  return ValidateBlend(in);
}

absl::Status ModelRunner::ValidateBlend(const ModelInput& in) const {
  if (in.blend_groups.empty()) return absl::OkStatus();
  if (in.blend_layer < 0 || in.blend_layer >= config().n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("ModelInput: blend_layer = ", in.blend_layer,
                                                   " is outside [0, ", config().n_layers, ")"));
  }
  const auto num_tokens = static_cast<int32_t>(in.token_ids.size());
  int32_t end = 0;
  size_t seq = 0;
  for (size_t g = 0; g < in.blend_groups.size(); ++g) {
    const BlendGroup& group = in.blend_groups[g];
    if (group.num_rows < 1 || group.first_row < end ||
        int64_t{group.first_row} + group.num_rows > num_tokens || group.num_keep < 0 ||
        group.num_keep > group.num_rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModelInput: blend group ", g, " (first_row ", group.first_row, ", num_rows ",
          group.num_rows, ", num_keep ", group.num_keep,
          ") needs num_rows >= 1 inside the batch, no overlap with the previous group, and "
          "num_keep in [0, num_rows]"));
    }
    end = group.first_row + group.num_rows;
    while (in.query_start_loc[seq + 1] <= group.first_row) ++seq;
    if (end > in.query_start_loc[seq + 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelInput: blend group ", g, " spans more than one sequence"));
    }
    for (int32_t t = group.first_row; t < end; ++t) {
      if (in.slot_mapping[static_cast<size_t>(t)] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("ModelInput: blend group ", g, " row ", t,
                                                       " has no KV slot (slot_mapping -1)"));
      }
    }
  }
  for (int32_t row : in.logits_indices) {
    auto it =
        std::upper_bound(in.blend_groups.begin(), in.blend_groups.end(), row,
                         [](int32_t r, const BlendGroup& group) { return r < group.first_row; });
    if (it != in.blend_groups.begin() && row < std::prev(it)->first_row + std::prev(it)->num_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelInput: logits row ", row, " lies in a blend group"));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::EnsureCapacity(int64_t num_tokens, int64_t num_seqs,
                                         int64_t num_block_entries, int64_t num_logits) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  auto alloc = [&](DeviceBuffer& buf, int64_t count, size_t elem) -> absl::Status {
    PAGEDKV_ASSIGN_OR_RETURN(buf, DeviceBuffer::Create(b, static_cast<size_t>(count) * elem));
    return absl::OkStatus();
  };
  if (num_tokens > token_capacity_) {
    const int64_t n = Grow(token_capacity_, num_tokens);
    PAGEDKV_RETURN_IF_ERROR(alloc(x_, n * c.dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(xb_, n * c.dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(q_, n * c.dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(k_, n * c.kv_dim(), sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(v_, n * c.kv_dim(), sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(att_, n * c.dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(hb_, n * c.hidden_dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(hb2_, n * c.hidden_dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(token_ids_, n, sizeof(TokenId)));
    PAGEDKV_RETURN_IF_ERROR(alloc(positions_, n, sizeof(int32_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(slots_, n, sizeof(int64_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(blend_rows_, n, sizeof(int32_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(blend_scratch_, n * c.dim, sizeof(float)));
    token_capacity_ = n;
  }
  if (num_seqs + 1 > seq_capacity_) {
    const int64_t n = Grow(seq_capacity_, num_seqs + 1);
    PAGEDKV_RETURN_IF_ERROR(alloc(query_start_loc_, n, sizeof(int32_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(kv_lens_, n, sizeof(int32_t)));
    seq_capacity_ = n;
  }
  if (num_block_entries > block_entry_capacity_) {
    const int64_t n = Grow(block_entry_capacity_, num_block_entries);
    PAGEDKV_RETURN_IF_ERROR(alloc(block_tables_, n, sizeof(BlockId)));
    block_entry_capacity_ = n;
  }
  if (num_logits > logits_capacity_) {
    const int64_t n = Grow(logits_capacity_, num_logits);
    PAGEDKV_RETURN_IF_ERROR(alloc(rows_, n * c.dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(logits_, n * c.vocab_size, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(logits_indices_, n, sizeof(int32_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(sampling_params_, n, sizeof(SamplingParams)));
    PAGEDKV_RETURN_IF_ERROR(alloc(sampled_, n, sizeof(TokenId)));
    logits_capacity_ = n;
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::RunLayers(const ModelInput& in, std::vector<int32_t>* logits_rows,
                                    std::vector<int32_t>* kept_rows) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  const auto num_seqs = static_cast<int32_t>(in.query_start_loc.size() - 1);
  float* x = x_.as<float>();
  float* xb = xb_.as<float>();
  float* q = q_.as<float>();
  float* k = k_.as<float>();
  float* v = v_.as<float>();
  float* att = att_.as<float>();
  float* hb = hb_.as<float>();
  float* hb2 = hb2_.as<float>();

  PAGEDKV_RETURN_IF_ERROR(b.EmbeddingGather({.table = token_embedding_,
                                             .token_ids = token_ids_.as<const int32_t>(),
                                             .out = x,
                                             .num_tokens = num_tokens,
                                             .vocab_size = c.vocab_size,
                                             .dim = c.dim}));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    PAGEDKV_RETURN_IF_ERROR(b.RmsNorm({.x = x,
                                       .weight = w.rms_att,
                                       .out = xb,
                                       .num_rows = num_tokens,
                                       .dim = c.dim,
                                       .eps = c.rms_norm_eps}));
    PAGEDKV_RETURN_IF_ERROR(
        b.Linear({.x = xb, .w = w.wq, .y = q, .m = num_tokens, .n = c.dim, .k = c.dim}));
    PAGEDKV_RETURN_IF_ERROR(
        b.Linear({.x = xb, .w = w.wk, .y = k, .m = num_tokens, .n = c.kv_dim(), .k = c.dim}));
    PAGEDKV_RETURN_IF_ERROR(
        b.Linear({.x = xb, .w = w.wv, .y = v, .m = num_tokens, .n = c.kv_dim(), .k = c.dim}));
    ReshapeAndCacheArgs write;
    write.q = q;
    write.k = k;
    write.v = v;
    write.positions = positions_.as<const int32_t>();
    write.slot_mapping = slots_.as<const int64_t>();
    write.num_tokens = num_tokens;
    write.num_q_heads = c.n_heads;
    write.rotate = true;
    write.rope = rope_view_;
    write.cache = kv_layouts_[static_cast<size_t>(l)];
    if (!in.blend_groups.empty() && l == in.blend_layer) {
      PAGEDKV_RETURN_IF_ERROR(BlendAndCompact(in, l, write, &num_tokens, logits_rows, kept_rows));
      if (num_tokens == 0) break;  // every row stopped here (no logits are wanted then)
    } else {
      PAGEDKV_RETURN_IF_ERROR(b.ReshapeAndCache(write));
    }
    PagedAttentionArgs attn;
    attn.q = q;
    attn.out = att;
    attn.positions = positions_.as<const int32_t>();
    attn.query_start_loc = query_start_loc_.as<const int32_t>();
    attn.kv_lens = kv_lens_.as<const int32_t>();
    attn.block_tables = block_tables_.as<const int32_t>();
    attn.num_tokens = num_tokens;
    attn.num_seqs = num_seqs;
    attn.num_q_heads = c.n_heads;
    attn.max_blocks_per_seq = in.max_blocks_per_seq;
    attn.cache = kv_layouts_[static_cast<size_t>(l)];
    PAGEDKV_RETURN_IF_ERROR(b.PagedAttention(attn));
    PAGEDKV_RETURN_IF_ERROR(b.Linear({.x = att,
                                      .w = w.wo,
                                      .y = x,
                                      .m = num_tokens,
                                      .n = c.dim,
                                      .k = c.dim,
                                      .accumulate = true}));
    PAGEDKV_RETURN_IF_ERROR(b.RmsNorm({.x = x,
                                       .weight = w.rms_ffn,
                                       .out = xb,
                                       .num_rows = num_tokens,
                                       .dim = c.dim,
                                       .eps = c.rms_norm_eps}));
    PAGEDKV_RETURN_IF_ERROR(
        b.Linear({.x = xb, .w = w.w1, .y = hb, .m = num_tokens, .n = c.hidden_dim, .k = c.dim}));
    PAGEDKV_RETURN_IF_ERROR(
        b.Linear({.x = xb, .w = w.w3, .y = hb2, .m = num_tokens, .n = c.hidden_dim, .k = c.dim}));
    PAGEDKV_RETURN_IF_ERROR(
        b.SwiGlu({.gate = hb, .up = hb2, .out = hb, .num_rows = num_tokens, .dim = c.hidden_dim}));
    PAGEDKV_RETURN_IF_ERROR(b.Linear({.x = hb,
                                      .w = w.w2,
                                      .y = x,
                                      .m = num_tokens,
                                      .n = c.dim,
                                      .k = c.hidden_dim,
                                      .accumulate = true}));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::BlendAndCompact(const ModelInput& in, int32_t layer,
                                          const ReshapeAndCacheArgs& write, int64_t* num_rows,
                                          std::vector<int32_t>* logits_rows,
                                          std::vector<int32_t>* kept_rows) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  // Compaction happens once, at blend_layer, so the rows are still the input's rows here.
  std::vector<int64_t> group_slots;
  for (const BlendGroup& group : in.blend_groups) {
    group_slots.insert(group_slots.end(), in.slot_mapping.begin() + group.first_row,
                       in.slot_mapping.begin() + group.first_row + group.num_rows);
  }
  std::vector<float> k_old, v_old, k_new, v_new;
  PAGEDKV_RETURN_IF_ERROR(ReadKv(layer, group_slots, &k_old, &v_old));
  PAGEDKV_RETURN_IF_ERROR(b.ReshapeAndCache(write));
  PAGEDKV_RETURN_IF_ERROR(ReadKv(layer, group_slots, &k_new, &v_new));

  const int64_t width = c.kv_dim();
  std::vector<char> keep(in.token_ids.size(), 1);
  size_t offset = 0;  // into group_slots
  for (const BlendGroup& group : in.blend_groups) {
    const auto span = [&](const std::vector<float>& all) {
      return std::span<const float>(all).subspan(offset * static_cast<size_t>(width),
                                                 static_cast<size_t>(group.num_rows * width));
    };
    std::fill_n(keep.begin() + group.first_row, group.num_rows, 0);
    for (int32_t j : MostDeviatingTokens(span(k_old), span(v_old), span(k_new), span(v_new), width,
                                         group.num_keep)) {
      keep[static_cast<size_t>(group.first_row + j)] = 1;
      kept_rows->push_back(group.first_row + j);
    }
    offset += static_cast<size_t>(group.num_rows);
  }

  // The compacted batch: rows kept, in order, with their positions, slots and sequence bounds.
  std::vector<int32_t> rows, new_index(in.token_ids.size(), -1), positions, qsl;
  std::vector<int64_t> slots;
  qsl.push_back(0);
  for (size_t s = 0; s + 1 < in.query_start_loc.size(); ++s) {
    for (int32_t t = in.query_start_loc[s]; t < in.query_start_loc[s + 1]; ++t) {
      if (!keep[static_cast<size_t>(t)]) continue;
      new_index[static_cast<size_t>(t)] = static_cast<int32_t>(rows.size());
      rows.push_back(t);
      positions.push_back(in.positions[static_cast<size_t>(t)]);
      slots.push_back(in.slot_mapping[static_cast<size_t>(t)]);
    }
    qsl.push_back(static_cast<int32_t>(rows.size()));
  }
  logits_rows->clear();
  for (int32_t row : in.logits_indices) logits_rows->push_back(new_index[static_cast<size_t>(row)]);
  if (static_cast<int64_t>(rows.size()) == *num_rows) return absl::OkStatus();
  *num_rows = static_cast<int64_t>(rows.size());
  if (rows.empty()) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, blend_rows_, absl::MakeConstSpan(rows)));
  // x (the residual stream entering this layer) and the rotated q of the kept rows.
  for (float* buffer : {x_.as<float>(), q_.as<float>()}) {
    PAGEDKV_RETURN_IF_ERROR(b.EmbeddingGather({.table = buffer,
                                               .token_ids = blend_rows_.as<const int32_t>(),
                                               .out = blend_scratch_.as<float>(),
                                               .num_tokens = *num_rows,
                                               .vocab_size = static_cast<int64_t>(keep.size()),
                                               .dim = c.dim}));
    PAGEDKV_RETURN_IF_ERROR(b.CopyDeviceToDevice(
        buffer, blend_scratch_.data(), static_cast<size_t>(*num_rows * c.dim) * sizeof(float)));
  }
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, positions_, absl::MakeConstSpan(positions)));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, slots_, absl::MakeConstSpan(slots)));
  return CopySpan(b, query_start_loc_, absl::MakeConstSpan(qsl));
}

absl::Status ModelRunner::Forward(const ModelInput& in, const ForwardOptions& options,
                                  ModelOutput* output) {
  if (output == nullptr) return absl::InvalidArgumentError("ModelRunner::Forward: output is null");
  PAGEDKV_RETURN_IF_ERROR(ValidateInput(in, options));
  output->logits.clear();
  output->sampled.clear();
  output->blend_kept_rows.clear();
  const ModelConfig& c = config();
  Backend& b = *backend_;
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  const auto num_logits = static_cast<int64_t>(in.logits_indices.size());
  if (num_tokens == 0) {
    if (num_logits != 0) return absl::InvalidArgumentError("logits wanted from an empty batch");
    return absl::OkStatus();
  }
  PAGEDKV_RETURN_IF_ERROR(EnsureCapacity(num_tokens,
                                         static_cast<int64_t>(in.query_start_loc.size()) - 1,
                                         static_cast<int64_t>(in.block_tables.size()), num_logits));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, token_ids_, in.token_ids));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, positions_, in.positions));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, slots_, in.slot_mapping));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, query_start_loc_, in.query_start_loc));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, kv_lens_, in.kv_lens));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, block_tables_, in.block_tables));
  std::vector<int32_t> logits_rows(in.logits_indices.begin(), in.logits_indices.end());
  PAGEDKV_RETURN_IF_ERROR(RunLayers(in, &logits_rows, &output->blend_kept_rows));
  if (num_logits == 0) return b.Synchronize();

  // Final norm and LM head on the wanted rows only.
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, logits_indices_, absl::MakeConstSpan(logits_rows)));
  float* rows = rows_.as<float>();
  PAGEDKV_RETURN_IF_ERROR(b.EmbeddingGather({.table = x_.as<const float>(),
                                             .token_ids = logits_indices_.as<const int32_t>(),
                                             .out = rows,
                                             .num_tokens = num_logits,
                                             .vocab_size = num_tokens,
                                             .dim = c.dim}));
  PAGEDKV_RETURN_IF_ERROR(b.RmsNorm({.x = rows,
                                     .weight = rms_final_,
                                     .out = rows,
                                     .num_rows = num_logits,
                                     .dim = c.dim,
                                     .eps = c.rms_norm_eps}));
  PAGEDKV_RETURN_IF_ERROR(b.LmHead({.hidden = rows,
                                    .weight = classifier_,
                                    .logits = logits_.as<float>(),
                                    .num_rows = num_logits,
                                    .d_model = c.dim,
                                    .vocab_size = c.vocab_size}));
  if (!options.sampling.empty()) {
    PAGEDKV_RETURN_IF_ERROR(CopySpan(b, sampling_params_, options.sampling));
    PAGEDKV_RETURN_IF_ERROR(b.Sample({.logits = logits_.as<const float>(),
                                      .params = sampling_params_.as<const SamplingParams>(),
                                      .out_tokens = sampled_.as<int32_t>(),
                                      .num_seqs = num_logits,
                                      .vocab_size = c.vocab_size}));
    output->sampled.resize(static_cast<size_t>(num_logits));
    PAGEDKV_RETURN_IF_ERROR(b.CopyToHost(output->sampled.data(), sampled_.data(),
                                         output->sampled.size() * sizeof(TokenId)));
  }
  if (options.return_logits) {
    output->logits.resize(static_cast<size_t>(num_logits * c.vocab_size));
    PAGEDKV_RETURN_IF_ERROR(
        b.CopyToHost(output->logits.data(), logits_.data(), output->logits.size() * sizeof(float)));
  }
  return b.Synchronize();
}

absl::Status ModelRunner::ReadKv(int32_t layer, absl::Span<const int64_t> slots,
                                 std::vector<float>* k, std::vector<float>* v) {
  if (layer < 0 || layer >= config().n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadKv: layer ", layer, " is outside [0, ", config().n_layers, ")"));
  }
  const PagedKvLayout& layout = kv_layouts_[static_cast<size_t>(layer)];
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0 || slots[i] >= layout.NumSlots()) {
      return absl::InvalidArgumentError(absl::StrCat("ReadKv: slots[", i, "] = ", slots[i],
                                                     " is outside [0, ", layout.NumSlots(), ")"));
    }
  }
  const int64_t stride = layout.TokenStride();
  const size_t row_bytes = static_cast<size_t>(stride * DTypeSize(layout.dtype));
  std::vector<char> staging(row_bytes);
  for (int part = 0; part < 2; ++part) {
    std::vector<float>& out = part == 0 ? *k : *v;
    const char* base = static_cast<const char*>(part == 0 ? layout.k : layout.v);
    out.resize(slots.size() * static_cast<size_t>(stride));
    for (size_t i = 0; i < slots.size(); ++i) {
      PAGEDKV_RETURN_IF_ERROR(backend_->CopyToHost(
          staging.data(), base + static_cast<size_t>(slots[i]) * row_bytes, row_bytes));
      for (int64_t e = 0; e < stride; ++e) {
        out[i * static_cast<size_t>(stride) + static_cast<size_t>(e)] =
            LoadElement(staging.data(), layout.dtype, e);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
