// Copyright 2026 The pagedkv Authors.
//
// ModelRunner K/V: RoPE and the K/V write of a layer (per run of sequences under per-step RoPE),
// a layer hook's calls around it and the compaction of the rows it drops, and ReadKv.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/layer_hook.h"
#include "engine/model/runner/model_runner.h"
#include "engine/model/runner/runner_buffers.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

using runner_internal::CopySpan;
using runner_internal::Grow;

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
  if (!key_rows_.empty()) PAGEDKV_RETURN_IF_ERROR(CopyRotatedKeys(layer, *active));
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
  write.slot_mapping = ForLayer(rows, layer).slots;  // the layer's KV cache group
  write.num_tokens = rows.num_rows;
  write.num_q_heads = c.n_heads;
  write.rotate = true;
  write.rope = rope_view_;
  write.cache = kv_layouts_[static_cast<size_t>(layer)];
  if (!key_rows_.empty()) write.rotated_k = rotated_k_.as<float>() + rows.row0 * c.kv_dim();
  return write;
}

absl::Status ModelRunner::PrepareKeyRows(absl::Span<const int32_t> key_rows, int64_t num_tokens,
                                         ModelOutput* output) {
  key_rows_ = key_rows;
  key_output_ = output;
  if (key_rows.empty()) return absl::OkStatus();
  const int64_t width = config().kv_dim();
  if (num_tokens > rotated_k_capacity_) {
    const int64_t capacity = Grow(rotated_k_capacity_, num_tokens);
    PAGEDKV_ASSIGN_OR_RETURN(
        rotated_k_,
        DeviceBuffer::Create(*backend_, static_cast<size_t>(capacity * width) * sizeof(float)));
    rotated_k_capacity_ = capacity;
  }
  output->rotated_keys.assign(
      static_cast<size_t>(config().n_layers) * key_rows.size() * static_cast<size_t>(width), 0.0f);
  return absl::OkStatus();
}

absl::Status ModelRunner::CopyRotatedKeys(int32_t layer, const ActiveRows& active) {
  const auto width = static_cast<size_t>(config().kv_dim());
  const size_t num_rows = active.rows.size();
  const float* rotated = rotated_k_.as<const float>();
  std::vector<float> host;  // a device backend's rows, copied down whole (a capture is rare)
  if (!backend_->host_memory()) {
    host.resize(num_rows * width);
    PAGEDKV_RETURN_IF_ERROR(
        backend_->CopyToHost(host.data(), rotated_k_.data(), host.size() * sizeof(float)));
    rotated = host.data();
  }
  float* out =
      key_output_->rotated_keys.data() + static_cast<size_t>(layer) * key_rows_.size() * width;
  size_t current = 0;  // both lists ascend: the current row of each key row
  for (size_t i = 0; i < key_rows_.size(); ++i) {
    while (current < num_rows && active.rows[current] < key_rows_[i]) ++current;
    if (current == num_rows || active.rows[current] != key_rows_[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("LayerHook dropped batch row ", key_rows_[i], " before layer ", layer,
                       ", whose keys ForwardOptions::key_rows asked for; keep it"));
    }
    std::copy_n(rotated + current * width, width, out + i * width);
  }
  return absl::OkStatus();
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
    if (all.rotated_k != nullptr) write.rotated_k = all.rotated_k + begin * c.kv_dim();
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
  if (IsQuantizedDType(layout.dtype) || layout.MixedDTypes()) {
    return ReadKvRowByRow(layout, slots, k, v);
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

absl::Status ModelRunner::ReadKvRowByRow(const PagedKvLayout& layout,
                                         absl::Span<const int64_t> slots, std::vector<float>* k,
                                         std::vector<float>* v) {
  const int32_t hd = layout.head_dim, heads = layout.num_kv_heads;
  const int64_t width = int64_t{heads} * hd;
  std::vector<float> k_out(slots.size() * width), v_out(slots.size() * width);
  const PagedKvLayout k_side = layout.KSide(), v_side = layout.VSide();
  for (auto [side, out] : {std::pair{&k_side, &k_out}, std::pair{&v_side, &v_out}}) {
    const int64_t unit = DTypeSize(side->dtype);
    std::vector<unsigned char> bytes(static_cast<size_t>(side->TokenStride() * unit));
    for (size_t i = 0; i < slots.size(); ++i) {
      const void* token =
          static_cast<const unsigned char*>(side->k) + side->SlotOffset(slots[i]) * unit;
      if (!backend_->host_memory()) {
        PAGEDKV_RETURN_IF_ERROR(backend_->CopyToHost(bytes.data(), token, bytes.size()));
        token = bytes.data();
      }
      for (int32_t h = 0; h < heads; ++h) {
        LoadKvRow(token, side->dtype, h * side->HeadStride(), hd,
                  out->data() + i * width + int64_t{h} * hd);
      }
    }
  }
  *k = std::move(k_out);
  *v = std::move(v_out);
  return absl::OkStatus();
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
