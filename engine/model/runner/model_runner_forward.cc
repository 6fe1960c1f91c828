// Copyright 2026 The pagedkv Authors.
//
// ModelRunner forward pass: inputs up, the embedding gather, every layer (RMSNorm, Q/K/V
// projections, RoPE and K/V write, paged attention, output projection, SwiGLU MLP), then the final
// norm, LM head, sampling and the copies back to the host.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "engine/model/runner/layer_hook.h"
#include "engine/model/runner/logit_edits.h"
#include "engine/model/runner/model_runner.h"
#include "engine/model/runner/runner_buffers.h"
#include "pagedkv/dtype.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

using runner_internal::CopySpan;

absl::Status ModelRunner::Forward(const ModelInput& in, const ForwardOptions& options,
                                  ModelOutput* output) {
  if (output == nullptr) return absl::InvalidArgumentError("ModelRunner::Forward: output is null");
  PAGEDKV_RETURN_IF_ERROR(ValidateInput(in, options));
  output->logits.clear();
  output->sampled.clear();
  output->row_logits.clear();
  output->rotated_keys.clear();
  Backend& b = *backend_;
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  const auto num_logits = static_cast<int64_t>(in.logits_indices.size());
  token_count_ = num_tokens;
  table_entry_count_ = static_cast<int64_t>(in.block_tables.size());
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
  PAGEDKV_RETURN_IF_ERROR(UploadGroups(in));
  PAGEDKV_RETURN_IF_ERROR(step_rope_.Prepare(b, rope_config_, rope_view_, in.kv_lens));
  PAGEDKV_RETURN_IF_ERROR(GatherEmbeddings(num_tokens));
  PAGEDKV_RETURN_IF_ERROR(PrepareKeyRows(options.key_rows, num_tokens, output));
  ActiveRows active = AllRows(in);
  const std::vector<BatchPart> parts = PlanParts(in, options);
  PAGEDKV_RETURN_IF_ERROR(parts.size() > 1 ? RunLayersInParts(in, parts)
                                           : RunLayers(in, options.hook, &active));
  key_rows_ = {};
  key_output_ = nullptr;
  last_forward_parts_ = std::max<int32_t>(1, static_cast<int32_t>(parts.size()));
  if (num_logits == 0) return b.Synchronize();
  PAGEDKV_RETURN_IF_ERROR(RunHead(active.logits_rows));
  return CopyOutputs(options, num_logits, output);
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
          .block_tables = block_tables_.as<const BlockId>(),
          .group_slots = group_slots_.as<const int64_t>(),
          .group_block_tables = group_block_tables_.as<const BlockId>(),
          .group_slot_stride = num_kv_groups_ > 1 ? token_count_ : 0,
          .group_table_stride = num_kv_groups_ > 1 ? table_entry_count_ : 0};
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
  attn.block_tables = ForLayer(rows, layer).block_tables;  // the layer's KV cache group
  attn.num_tokens = num_rows;
  attn.num_seqs = rows.num_seqs;
  attn.num_q_heads = c.n_heads;
  attn.max_blocks_per_seq = rows.max_blocks_per_seq;
  attn.sliding_window = c.LayerWindow(layer);  // 0: full attention
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

absl::Status ModelRunner::CopyRows(absl::Span<const int32_t> rows, ModelOutput* output) {
  const int64_t vocab = config().vocab_size;
  output->row_logits.resize(rows.size() * static_cast<size_t>(vocab));
  for (size_t i = 0; i < rows.size(); ++i) {  // rows were validated by ValidateOutputs
    PAGEDKV_RETURN_IF_ERROR(backend_->CopyToHost(
        output->row_logits.data() + i * static_cast<size_t>(vocab),
        logits_.as<const float>() + rows[i] * vocab, static_cast<size_t>(vocab) * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::EditRows(absl::Span<const RowLogitEdits> edits) {
  if (edits.empty()) return absl::OkStatus();  // the common case costs nothing
  const auto vocab = static_cast<size_t>(config().vocab_size);
  std::vector<float> row(backend_->host_memory() ? 0 : vocab);
  for (const RowLogitEdits& e : edits) {  // validated by ValidateOutputs
    float* device_row = logits_.as<float>() + static_cast<size_t>(e.row) * vocab;
    if (backend_->host_memory()) {  // the CPU backend: edited in place
      ApplyLogitEdits(e, absl::MakeSpan(device_row, vocab));
      continue;
    }
    PAGEDKV_RETURN_IF_ERROR(backend_->CopyToHost(row.data(), device_row, vocab * sizeof(float)));
    ApplyLogitEdits(e, absl::MakeSpan(row));
    PAGEDKV_RETURN_IF_ERROR(backend_->CopyToDevice(device_row, row.data(), vocab * sizeof(float)));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::CopyOutputs(const ForwardOptions& options, int64_t num_logits,
                                      ModelOutput* output) {
  const ModelConfig& c = config();
  Backend& b = *backend_;
  // The raw logits go out first (logprobs are the model's distribution, as vLLM's default);
  // the edits then change the rows the sample op reads.
  PAGEDKV_RETURN_IF_ERROR(CopyRows(options.copy_rows, output));
  if (options.return_logits) {
    output->logits.resize(static_cast<size_t>(num_logits * c.vocab_size));
    PAGEDKV_RETURN_IF_ERROR(
        b.CopyToHost(output->logits.data(), logits_.data(), output->logits.size() * sizeof(float)));
  }
  PAGEDKV_RETURN_IF_ERROR(EditRows(options.logit_edits));
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
  return b.Synchronize();
}

}  // namespace pagedkv
