// Copyright 2026 The pagedkv Authors.
#include "engine/model/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/layer_hook.h"
#include "pagedkv/dtype.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

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
  if (model.rope.has_value()) return *model.rope;
  RopeConfig rope;
  rope.head_dim = model.head_dim();
  rope.rotary_dim = 0;
  rope.base = model.rope_base;
  rope.layout = RopeLayout::kInterleaved;
  rope.scaling = RopeScaling::kNone;
  rope.max_position_embeddings = model.seq_len;
  return rope;
}

int64_t ContextLengthFor(const ModelConfig& model, const RopeConfig& rope) {
  switch (rope.scaling) {
    case RopeScaling::kNone:
      return model.seq_len;
    case RopeScaling::kLinear:
    case RopeScaling::kNtk:
      return static_cast<int64_t>(std::floor(model.seq_len * rope.factor));
    case RopeScaling::kDynamicNtk:  // per step: the lengths the scaling is for
      if (rope.dynamic_seq_len == 0) {
        return static_cast<int64_t>(std::floor(model.seq_len * rope.factor));
      }
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
  PAGEDKV_ASSIGN_OR_RETURN(backend_,
                           CreateBackend(options_.backend, {.num_threads = options_.num_threads}));
  PAGEDKV_RETURN_IF_ERROR(BuildRopeTable());
  PAGEDKV_RETURN_IF_ERROR(PlaceWeights());
  return AllocateKvPages();
}

absl::Status ModelRunner::BuildRopeTable() {
  const int64_t table_positions = options_.rope_table_positions > 0
                                      ? options_.rope_table_positions
                                      : std::max<int64_t>(context_length_, 1);
  PAGEDKV_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Create(rope_config_, table_positions));
  rope_table_.emplace(std::move(table));
  rope_view_ = rope_table_->View();
  if (backend_->host_memory()) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(rope_cos_sin_, Upload(*backend_, rope_table_->cos_sin().data(),
                                                 rope_table_->cos_sin().size() * sizeof(float)));
  PAGEDKV_ASSIGN_OR_RETURN(rope_inv_freq_, Upload(*backend_, rope_table_->inv_freq().data(),
                                                  rope_table_->inv_freq().size() * sizeof(double)));
  rope_view_.cos_sin = rope_cos_sin_.as<const float>();
  rope_view_.inv_freq = rope_inv_freq_.as<const double>();
  return absl::OkStatus();
}

absl::StatusOr<const float*> ModelRunner::PlaceTensor(const float* host, int64_t count) {
  if (host == nullptr) return nullptr;  // a matrix kept in block format (NativeMatrix)
  if (backend_->host_memory()) {        // weights are constant while the runner (and backend) lives
    PAGEDKV_RETURN_IF_ERROR(
        backend_->DeclareConstant(host, static_cast<size_t>(count) * sizeof(float)));
    return host;
  }
  PAGEDKV_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           Upload(*backend_, host, static_cast<size_t>(count) * sizeof(float)));
  const float* ptr = buffer.as<const float>();
  uploaded_weights_.push_back(std::move(buffer));
  return ptr;
}

absl::Status ModelRunner::PlaceWeights() {
  const ModelConfig& c = weights_->config();
  const int64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  if (weights_->has_native()) {
    if (!backend_->host_memory()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weights kept in block format (native) run on the CPU backend only; load the model "
          "with fp32 weights (--weights f32) for backend ",
          backend_->name()));
    }
  }
  native_token_embedding_ = weights_->native_token_embedding();
  native_classifier_ = weights_->native_classifier();
  PAGEDKV_ASSIGN_OR_RETURN(token_embedding_,
                           PlaceTensor(weights_->token_embedding(), int64_t{c.vocab_size} * d));
  PAGEDKV_ASSIGN_OR_RETURN(rms_final_, PlaceTensor(weights_->rms_final(), d));
  if (c.shared_classifier) {
    classifier_ = token_embedding_;
  } else {
    PAGEDKV_ASSIGN_OR_RETURN(classifier_,
                             PlaceTensor(weights_->classifier(), int64_t{c.vocab_size} * d));
  }
  layers_.resize(static_cast<size_t>(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& src = weights_->layer(l);
    LayerWeights& dst = layers_[static_cast<size_t>(l)];
    dst = src;  // the native matrices (host memory); the pointers are placed below
    PAGEDKV_ASSIGN_OR_RETURN(dst.rms_att, PlaceTensor(src.rms_att, d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wq, PlaceTensor(src.wq, q * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wk, PlaceTensor(src.wk, kv * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wv, PlaceTensor(src.wv, kv * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.wo, PlaceTensor(src.wo, d * q));
    PAGEDKV_ASSIGN_OR_RETURN(dst.rms_ffn, PlaceTensor(src.rms_ffn, d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w1, PlaceTensor(src.w1, h * d));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w2, PlaceTensor(src.w2, d * h));
    PAGEDKV_ASSIGN_OR_RETURN(dst.w3, PlaceTensor(src.w3, h * d));
    if (c.qkv_bias) {
      PAGEDKV_ASSIGN_OR_RETURN(dst.bq, PlaceTensor(src.bq, q));
      PAGEDKV_ASSIGN_OR_RETURN(dst.bk, PlaceTensor(src.bk, kv));
      PAGEDKV_ASSIGN_OR_RETURN(dst.bv, PlaceTensor(src.bv, kv));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::AllocateKvPages() {
  const ModelConfig& c = weights_->config();
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
    // x_, q_ and gather_scratch_ trade places in UploadCompacted: one row width for all three.
    const int64_t wide = std::max(c.dim, c.q_dim());
    PAGEDKV_RETURN_IF_ERROR(alloc(x_, n * wide, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(xb_, n * c.dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(q_, n * wide, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(k_, n * c.kv_dim(), sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(v_, n * c.kv_dim(), sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(att_, n * c.q_dim(), sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(hb_, n * c.hidden_dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(hb2_, n * c.hidden_dim, sizeof(float)));
    PAGEDKV_RETURN_IF_ERROR(alloc(token_ids_, n, sizeof(TokenId)));
    PAGEDKV_RETURN_IF_ERROR(alloc(positions_, n, sizeof(int32_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(slots_, n, sizeof(int64_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(gather_rows_, n, sizeof(int64_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(gather_scratch_, n * wide, sizeof(float)));
    if (c.qkv_bias) {
      PAGEDKV_RETURN_IF_ERROR(alloc(zero_ids_, n, sizeof(TokenId)));
      const std::vector<TokenId> zeros(static_cast<size_t>(n), 0);
      PAGEDKV_RETURN_IF_ERROR(b.CopyToDevice(zero_ids_.data(), zeros.data(), zeros.size() * 4));
    }
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
    PAGEDKV_RETURN_IF_ERROR(alloc(logits_indices_, n, sizeof(int64_t)));
    PAGEDKV_RETURN_IF_ERROR(alloc(sampling_params_, n, sizeof(SamplingParams)));
    PAGEDKV_RETURN_IF_ERROR(alloc(sampled_, n, sizeof(TokenId)));
    logits_capacity_ = n;
  }
  return absl::OkStatus();
}

ModelRunner::ActiveRows ModelRunner::AllRows(const ModelInput& in) {
  ActiveRows active;
  active.rows.resize(in.token_ids.size());
  for (size_t i = 0; i < active.rows.size(); ++i) active.rows[i] = static_cast<int32_t>(i);
  active.positions.assign(in.positions.begin(), in.positions.end());
  active.slots.assign(in.slot_mapping.begin(), in.slot_mapping.end());
  active.query_start_loc.assign(in.query_start_loc.begin(), in.query_start_loc.end());
  active.logits_rows.assign(in.logits_indices.begin(), in.logits_indices.end());
  return active;
}

absl::Status ModelRunner::RunLayers(const ModelInput& in, LayerHook* hook, ActiveRows* active) {
  const ModelConfig& c = config();
  int64_t num_rows = static_cast<int64_t>(in.token_ids.size());
  const auto num_seqs = static_cast<int32_t>(in.query_start_loc.size() - 1);
  for (int32_t l = 0; l < c.n_layers && num_rows > 0; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    PAGEDKV_RETURN_IF_ERROR(ProjectQkv(w, WholeBatch(num_rows, num_seqs, in.max_blocks_per_seq)));
    PAGEDKV_RETURN_IF_ERROR(WriteKv(in, l, hook, active, &num_rows));
    if (num_rows == 0) break;  // a hook dropped every row (no logits are wanted then)
    PAGEDKV_RETURN_IF_ERROR(
        AttendAndMlp(w, l, WholeBatch(num_rows, num_seqs, in.max_blocks_per_seq)));
  }
  return absl::OkStatus();
}

ModelRunner::StepRows ModelRunner::WholeBatch(int64_t num_rows, int32_t num_seqs,
                                              int32_t max_blocks_per_seq) const {
  return {.row0 = 0,
          .num_rows = num_rows,
          .num_seqs = num_seqs,
          .max_blocks_per_seq = max_blocks_per_seq,
          .positions = positions_.as<const int32_t>(),
          .slots = slots_.as<const int64_t>(),
          .query_start_loc = query_start_loc_.as<const int32_t>(),
          .kv_lens = kv_lens_.as<const int32_t>(),
          .block_tables = block_tables_.as<const BlockId>()};
}

absl::Status ModelRunner::ProjectQkv(const LayerWeights& w, const StepRows& rows) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  float* xb = xb_.as<float>() + rows.row0 * c.dim;
  PAGEDKV_RETURN_IF_ERROR(b.RmsNorm({.x = x_.as<float>() + rows.row0 * c.dim,
                                     .weight = w.rms_att,
                                     .out = xb,
                                     .num_rows = rows.num_rows,
                                     .dim = c.dim,
                                     .eps = c.rms_norm_eps}));
  const int64_t n = rows.num_rows;
  PAGEDKV_RETURN_IF_ERROR(
      Project(xb, w.wq, w.native_wq, w.bq, q_.as<float>() + rows.row0 * c.q_dim(), n, c.q_dim()));
  PAGEDKV_RETURN_IF_ERROR(
      Project(xb, w.wk, w.native_wk, w.bk, k_.as<float>() + rows.row0 * c.kv_dim(), n, c.kv_dim()));
  return Project(xb, w.wv, w.native_wv, w.bv, v_.as<float>() + rows.row0 * c.kv_dim(), n,
                 c.kv_dim());
}

absl::Status ModelRunner::MatMul(const LinearArgs& a, const NativeMatrix& native) {
  if (native.data == nullptr) return backend_->Linear(a);
  return backend_->QuantLinear({.x = a.x,
                                .w = native.data,
                                .w_type = native.type,
                                .y = a.y,
                                .m = a.m,
                                .n = a.n,
                                .k = a.k,
                                .accumulate = a.accumulate});
}

absl::Status ModelRunner::Project(const float* x, const float* w, const NativeMatrix& native,
                                  const float* bias, float* y, int64_t num_rows, int64_t n) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  if (bias != nullptr) {  // y = bias broadcast to every row (a one-row table gathered at 0)
    PAGEDKV_RETURN_IF_ERROR(b.EmbeddingGather({.table = bias,
                                               .token_ids = zero_ids_.as<const int32_t>(),
                                               .out = y,
                                               .num_tokens = num_rows,
                                               .vocab_size = 1,
                                               .dim = n}));
  }
  return MatMul(
      {.x = x, .w = w, .y = y, .m = num_rows, .n = n, .k = c.dim, .accumulate = bias != nullptr},
      native);
}

absl::Status ModelRunner::WriteKv(const ModelInput& in, int32_t layer, LayerHook* hook,
                                  ActiveRows* active, int64_t* num_rows) {
  const PagedKvLayout& cache = kv_layouts_[static_cast<size_t>(layer)];
  const auto view = [&] {
    return LayerView{.layer = layer,
                     .input = &in,
                     .rows = active->rows,
                     .kv = &cache,
                     .hidden = x_.as<const float>(),
                     .q = q_.as<const float>(),
                     .runner = this};
  };
  if (hook != nullptr) PAGEDKV_RETURN_IF_ERROR(hook->BeforeKvWrite(view()));
  const ReshapeAndCacheArgs write = KvWrite(layer, WholeBatch(*num_rows, 0, 0));
  PAGEDKV_RETURN_IF_ERROR(step_rope_.Uniform() ? backend_->ReshapeAndCache(write)
                                               : WriteKvPerSequence(write, *active));
  if (hook == nullptr) return absl::OkStatus();
  std::optional<std::vector<int32_t>> keep;
  PAGEDKV_RETURN_IF_ERROR(hook->AfterKvWrite(view(), &keep));
  if (!keep.has_value() || keep->size() == active->rows.size()) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(CompactRows(*keep, active));
  *num_rows = static_cast<int64_t>(active->rows.size());
  return absl::OkStatus();
}

ReshapeAndCacheArgs ModelRunner::KvWrite(int32_t layer, const StepRows& rows) const {
  const ModelConfig& c = config();
  ReshapeAndCacheArgs write;
  write.q = q_.as<float>() + rows.row0 * c.q_dim();
  write.k = k_.as<const float>() + rows.row0 * c.kv_dim();
  write.v = v_.as<const float>() + rows.row0 * c.kv_dim();
  write.positions = rows.positions;
  write.slot_mapping = rows.slots;
  write.num_tokens = rows.num_rows;
  write.num_q_heads = c.n_heads;
  write.rotate = true;
  write.rope = rope_view_;
  write.cache = kv_layouts_[static_cast<size_t>(layer)];
  return write;
}

absl::Status ModelRunner::WriteKvPerSequence(const ReshapeAndCacheArgs& all,
                                             const ActiveRows& active) {
  const ModelConfig& c = config();
  const size_t num_seqs = active.query_start_loc.size() - 1;
  ReshapeAndCacheArgs write = all;
  for (size_t s = 0; s < num_seqs;) {  // one call per run of sequences sharing a view
    const RopeTableView* view = &step_rope_.ForSequence(static_cast<int64_t>(s));
    size_t e = s + 1;
    while (e < num_seqs && &step_rope_.ForSequence(static_cast<int64_t>(e)) == view) ++e;
    const int64_t begin = active.query_start_loc[s], end = active.query_start_loc[e];
    s = e;
    if (end == begin) continue;
    write.q = all.q + begin * c.q_dim();
    write.k = all.k + begin * c.kv_dim();
    write.v = all.v + begin * c.kv_dim();
    write.positions = all.positions + begin;
    write.slot_mapping = all.slot_mapping + begin;
    write.num_tokens = end - begin;
    write.rope = *view;
    PAGEDKV_RETURN_IF_ERROR(backend_->ReshapeAndCache(write));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::CompactRows(const std::vector<int32_t>& keep, ActiveRows* active) {
  const size_t n = active->rows.size();
  std::vector<int32_t> new_index(n, -1);
  for (size_t i = 0; i < keep.size(); ++i) {
    const int32_t row = keep[i];
    if (row < 0 || static_cast<size_t>(row) >= n || (i > 0 && row <= keep[i - 1])) {
      return absl::FailedPreconditionError(absl::StrCat(
          "LayerHook: keep[", i, "] = ", row, " is not an ascending row in [0, ", n, ")"));
    }
    new_index[static_cast<size_t>(row)] = static_cast<int32_t>(i);
  }
  for (int32_t& row : active->logits_rows) {
    if (new_index[static_cast<size_t>(row)] < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("LayerHook dropped batch row ", active->rows[static_cast<size_t>(row)],
                       ", whose logits are wanted; keep every logits row"));
    }
    row = new_index[static_cast<size_t>(row)];
  }
  ActiveRows kept;
  kept.logits_rows = std::move(active->logits_rows);
  kept.query_start_loc.push_back(0);
  size_t next = 0;  // into keep
  for (size_t s = 0; s + 1 < active->query_start_loc.size(); ++s) {
    const auto end = static_cast<size_t>(active->query_start_loc[s + 1]);
    for (; next < keep.size() && static_cast<size_t>(keep[next]) < end; ++next) {
      const auto row = static_cast<size_t>(keep[next]);
      kept.rows.push_back(active->rows[row]);
      kept.positions.push_back(active->positions[row]);
      kept.slots.push_back(active->slots[row]);
    }
    kept.query_start_loc.push_back(static_cast<int32_t>(kept.rows.size()));
  }
  *active = std::move(kept);
  return UploadCompacted(keep, *active);
}

absl::Status ModelRunner::UploadCompacted(const std::vector<int32_t>& keep,
                                          const ActiveRows& active) {
  Backend& b = *backend_;
  const auto num_rows = static_cast<int64_t>(keep.size());
  if (num_rows == 0) return absl::OkStatus();
  const std::vector<int64_t> rows(keep.begin(), keep.end());
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, gather_rows_, absl::MakeConstSpan(rows)));
  // The residual stream entering this layer and the rotated queries of the kept rows: gathered
  // into the scratch buffer, which then takes the place of the source.
  const std::pair<DeviceBuffer*, int64_t> sources[] = {{&x_, config().dim},
                                                       {&q_, config().q_dim()}};
  for (const auto& [buffer, width] : sources) {
    PAGEDKV_RETURN_IF_ERROR(b.GatherRows({.src = buffer->data(),
                                          .rows = gather_rows_.as<const int64_t>(),
                                          .out = gather_scratch_.as<float>(),
                                          .num_rows = num_rows,
                                          .num_src_rows = static_cast<int64_t>(token_capacity_),
                                          .width = width,
                                          .src_dtype = DType::kF32}));
    std::swap(*buffer, gather_scratch_);
  }
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, positions_, absl::MakeConstSpan(active.positions)));
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, slots_, absl::MakeConstSpan(active.slots)));
  return CopySpan(b, query_start_loc_, absl::MakeConstSpan(active.query_start_loc));
}

absl::Status ModelRunner::AttendAndMlp(const LayerWeights& w, int32_t layer, const StepRows& rows) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  const int64_t num_rows = rows.num_rows;
  float* x = x_.as<float>() + rows.row0 * c.dim;
  float* xb = xb_.as<float>() + rows.row0 * c.dim;
  float* att = att_.as<float>() + rows.row0 * c.q_dim();
  float* hb = hb_.as<float>() + rows.row0 * c.hidden_dim;
  float* hb2 = hb2_.as<float>() + rows.row0 * c.hidden_dim;
  PagedAttentionArgs attn;
  attn.q = q_.as<const float>() + rows.row0 * c.q_dim();
  attn.out = att;
  attn.positions = rows.positions;
  attn.query_start_loc = rows.query_start_loc;
  attn.kv_lens = rows.kv_lens;
  attn.block_tables = rows.block_tables;
  attn.num_tokens = num_rows;
  attn.num_seqs = rows.num_seqs;
  attn.num_q_heads = c.n_heads;
  attn.max_blocks_per_seq = rows.max_blocks_per_seq;
  attn.cache = kv_layouts_[static_cast<size_t>(layer)];
  PAGEDKV_RETURN_IF_ERROR(b.PagedAttention(attn));
  PAGEDKV_RETURN_IF_ERROR(MatMul(
      {.x = att, .w = w.wo, .y = x, .m = num_rows, .n = c.dim, .k = c.q_dim(), .accumulate = true},
      w.native_wo));
  PAGEDKV_RETURN_IF_ERROR(b.RmsNorm({.x = x,
                                     .weight = w.rms_ffn,
                                     .out = xb,
                                     .num_rows = num_rows,
                                     .dim = c.dim,
                                     .eps = c.rms_norm_eps}));
  PAGEDKV_RETURN_IF_ERROR(MatMul(
      {.x = xb, .w = w.w1, .y = hb, .m = num_rows, .n = c.hidden_dim, .k = c.dim}, w.native_w1));
  PAGEDKV_RETURN_IF_ERROR(MatMul(
      {.x = xb, .w = w.w3, .y = hb2, .m = num_rows, .n = c.hidden_dim, .k = c.dim}, w.native_w3));
  PAGEDKV_RETURN_IF_ERROR(
      b.SwiGlu({.gate = hb, .up = hb2, .out = hb, .num_rows = num_rows, .dim = c.hidden_dim}));
  return MatMul({.x = hb,
                 .w = w.w2,
                 .y = x,
                 .m = num_rows,
                 .n = c.dim,
                 .k = c.hidden_dim,
                 .accumulate = true},
                w.native_w2);
}

absl::Status ModelRunner::Forward(const ModelInput& in, const ForwardOptions& options,
                                  ModelOutput* output) {
  if (output == nullptr) return absl::InvalidArgumentError("ModelRunner::Forward: output is null");
  PAGEDKV_RETURN_IF_ERROR(ValidateInput(in, options));
  output->logits.clear();
  output->sampled.clear();
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
  PAGEDKV_RETURN_IF_ERROR(step_rope_.Prepare(b, rope_config_, rope_view_, in.kv_lens));
  if (native_token_embedding_.data != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(b.QuantEmbeddingGather({.table = native_token_embedding_.data,
                                                    .table_type = native_token_embedding_.type,
                                                    .token_ids = token_ids_.as<const int32_t>(),
                                                    .out = x_.as<float>(),
                                                    .num_tokens = num_tokens,
                                                    .vocab_size = config().vocab_size,
                                                    .dim = config().dim}));
  } else {
    PAGEDKV_RETURN_IF_ERROR(b.EmbeddingGather({.table = token_embedding_,
                                               .token_ids = token_ids_.as<const int32_t>(),
                                               .out = x_.as<float>(),
                                               .num_tokens = num_tokens,
                                               .vocab_size = config().vocab_size,
                                               .dim = config().dim}));
  }
  ActiveRows active = AllRows(in);
  const std::vector<BatchPart> parts = PlanParts(in, options);
  PAGEDKV_RETURN_IF_ERROR(parts.size() > 1 ? RunLayersInParts(in, parts)
                                           : RunLayers(in, options.hook, &active));
  last_forward_parts_ = std::max<int32_t>(1, static_cast<int32_t>(parts.size()));
  if (num_logits == 0) return b.Synchronize();
  PAGEDKV_RETURN_IF_ERROR(RunHead(active.logits_rows));
  return CopyOutputs(options, num_logits, output);
}

absl::Status ModelRunner::RunHead(const std::vector<int32_t>& logits_rows) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  const auto num_logits = static_cast<int64_t>(logits_rows.size());
  // Final norm and LM head on the wanted rows only.
  const std::vector<int64_t> wanted(logits_rows.begin(), logits_rows.end());
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, logits_indices_, absl::MakeConstSpan(wanted)));
  float* rows = rows_.as<float>();
  PAGEDKV_RETURN_IF_ERROR(b.GatherRows({.src = x_.data(),
                                        .rows = logits_indices_.as<const int64_t>(),
                                        .out = rows,
                                        .num_rows = num_logits,
                                        .num_src_rows = token_capacity_,
                                        .width = c.dim,
                                        .src_dtype = DType::kF32}));
  PAGEDKV_RETURN_IF_ERROR(b.RmsNorm({.x = rows,
                                     .weight = rms_final_,
                                     .out = rows,
                                     .num_rows = num_logits,
                                     .dim = c.dim,
                                     .eps = c.rms_norm_eps}));
  if (native_classifier_.data != nullptr) {  // logits = rows classifier^T
    return MatMul({.x = rows,
                   .w = nullptr,
                   .y = logits_.as<float>(),
                   .m = num_logits,
                   .n = c.vocab_size,
                   .k = c.dim},
                  native_classifier_);
  }
  return b.LmHead({.hidden = rows,
                   .weight = classifier_,
                   .logits = logits_.as<float>(),
                   .num_rows = num_logits,
                   .d_model = c.dim,
                   .vocab_size = c.vocab_size});
}

absl::Status ModelRunner::CopyOutputs(const ForwardOptions& options, int64_t num_logits,
                                      ModelOutput* output) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
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
  const auto n = static_cast<int64_t>(slots.size());
  const int64_t width = layout.TokenStride();
  k->resize(static_cast<size_t>(n * width));
  v->resize(static_cast<size_t>(n * width));
  if (n == 0) return absl::OkStatus();
  GatherRowsArgs gather{.src = layout.k,
                        .rows = slots.data(),
                        .out = k->data(),
                        .num_rows = n,
                        .num_src_rows = layout.NumSlots(),
                        .width = width,
                        .src_dtype = layout.dtype};
  if (backend_->host_memory()) {  // straight into the caller's vectors
    PAGEDKV_RETURN_IF_ERROR(backend_->GatherRows(gather));
    gather.src = layout.v;
    gather.out = v->data();
    return backend_->GatherRows(gather);
  }
  return ReadKvThroughDevice(layout, slots, k, v);
}

absl::Status ModelRunner::ReadKvThroughDevice(const PagedKvLayout& layout,
                                              absl::Span<const int64_t> slots,
                                              std::vector<float>* k, std::vector<float>* v) {
  Backend& b = *backend_;
  const auto n = static_cast<int64_t>(slots.size());
  const int64_t width = layout.TokenStride();
  if (n > kv_read_capacity_) {
    const int64_t capacity = Grow(kv_read_capacity_, n);
    PAGEDKV_ASSIGN_OR_RETURN(
        kv_read_slots_, DeviceBuffer::Create(b, static_cast<size_t>(capacity) * sizeof(int64_t)));
    PAGEDKV_ASSIGN_OR_RETURN(
        kv_read_out_,
        DeviceBuffer::Create(b, static_cast<size_t>(2 * capacity * width) * sizeof(float)));
    kv_read_capacity_ = capacity;
  }
  PAGEDKV_RETURN_IF_ERROR(CopySpan(b, kv_read_slots_, slots));
  // K rows then V rows in one device buffer, so one copy (one synchronisation) brings both back.
  GatherRowsArgs gather{.src = layout.k,
                        .rows = kv_read_slots_.as<const int64_t>(),
                        .out = kv_read_out_.as<float>(),
                        .num_rows = n,
                        .num_src_rows = layout.NumSlots(),
                        .width = width,
                        .src_dtype = layout.dtype};
  PAGEDKV_RETURN_IF_ERROR(b.GatherRows(gather));
  gather.src = layout.v;
  gather.out = kv_read_out_.as<float>() + n * width;
  PAGEDKV_RETURN_IF_ERROR(b.GatherRows(gather));
  std::vector<float> both(static_cast<size_t>(2 * n * width));
  PAGEDKV_RETURN_IF_ERROR(
      b.CopyToHost(both.data(), kv_read_out_.data(), both.size() * sizeof(float)));
  std::copy(both.begin(), both.begin() + n * width, k->begin());
  std::copy(both.begin() + n * width, both.end(), v->begin());
  return absl::OkStatus();
}

}  // namespace pagedkv
