// Copyright 2026 The pagedkv Authors.
//
// ModelRunner setup: the RoPE configuration and table, Create / Init, the KV pages and the
// activation buffers (grown on demand). The other parts: model_runner_weights.cc (where the
// weights live, and the products and gathers that read them, fp32 or block format),
// model_runner_forward.cc (the forward pass), model_runner_kv.cc (K/V writes, hook compaction,
// ReadKv), model_runner_parts.cc (the split pass), model_runner_validate.cc (input checks).
#include "engine/model/runner/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/runner_buffers.h"
#include "pagedkv/dtype.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

using runner_internal::Grow;
using runner_internal::Upload;

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
  const std::pair<DType, const char*> kv_dtypes[] = {{options_.kv_dtype, "kv_dtype"},
                                                     {options_.VDType(), "kv_dtype_v"}};
  for (const auto& [dtype, field] : kv_dtypes) {
    if (!IsValidDType(dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelRunnerOptions.", field, " is not a DType value"));
    }
    if (c.head_dim() % KvRowValuesMultiple(dtype) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ModelRunnerOptions.", field, " ", DTypeName(dtype), " stores blocks of ",
                       KvRowValuesMultiple(dtype), " values, but the model's head_dim is ",
                       c.head_dim(), "; use int8, fp8_e4m3 or fp8_e5m2 (a scale per head)"));
    }
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
  PAGEDKV_RETURN_IF_ERROR(InitKvGroups());
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

absl::Status ModelRunner::AllocateKvPages() {
  const ModelConfig& c = weights_->config();
  // One page array per layer of the largest group (every layer without groups).
  const int32_t num_arrays =
      c.n_layers == 0 ? 0 : *std::max_element(layer_page_.begin(), layer_page_.end()) + 1;
  std::vector<PagedKvLayout> arrays(static_cast<size_t>(num_arrays));
  kv_pages_.reserve(2 * static_cast<size_t>(num_arrays));
  for (int32_t a = 0; a < num_arrays; ++a) {
    const PagedKvShape shape{.dtype = options_.kv_dtype,
                             .v_dtype = options_.VDType(),
                             .num_blocks = options_.num_blocks,
                             .block_size = options_.block_size,
                             .num_kv_heads = c.n_kv_heads,
                             .head_dim = c.head_dim()};
    PagedKvLayout layout = SeparateKvLayout(nullptr, nullptr, shape);
    PAGEDKV_ASSIGN_OR_RETURN(
        DeviceBuffer k,
        DeviceBuffer::Create(*backend_, static_cast<size_t>(layout.KSide().NumBytes())));
    PAGEDKV_ASSIGN_OR_RETURN(
        DeviceBuffer v,
        DeviceBuffer::Create(*backend_, static_cast<size_t>(layout.VSide().NumBytes())));
    layout.k = k.data();
    layout.v = v.data();
    kv_pages_.push_back(std::move(k));
    kv_pages_.push_back(std::move(v));
    arrays[static_cast<size_t>(a)] = layout;
  }
  kv_layouts_.resize(static_cast<size_t>(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    kv_layouts_[static_cast<size_t>(l)] = arrays[static_cast<size_t>(layer_page_[l])];
  }
  return absl::OkStatus();
}

int64_t ModelRunner::kv_cache_bytes() const {
  int64_t total = 0;
  for (const DeviceBuffer& pages : kv_pages_) total += static_cast<int64_t>(pages.bytes());
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

}  // namespace pagedkv
