// Copyright 2026 The pagedkv Authors.
//
// The model runner's split pass: a step of several sequences cut into parts (batch_parts.h) that
// the backend runs at once, one thread each. A layer is two phases per part, and every part
// finishes a phase before any starts the next, so the K/V of the whole batch is written before
// any part attends:
//   RunParts: part p's RMSNorm, Q/K/V projections, RoPE and K/V write of layer 0
//   RunParts: part p's attention and MLP of layer l, then its projections and K/V write of l + 1
//   ...
//   RunParts: part p's attention and MLP of the last layer
// The final norm, LM head and sampling then run over the whole batch (RunHead).
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/batch_parts.h"
#include "engine/model/runner/model_runner.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// Largest layer (its projection and MLP weights) a step is split for. Every part's thread reads
// all of a layer's weights, which is cheap while they stay in a core's cache (aidreams260K: 0.19
// MB a layer, TinyStories-656K: 0.75 MB); a bigger layer's ops are split instead, each thread
// reading its share of the weights (measured: a 4 MB layer of random15M ran 11% slower split, 8
// sequences on 2 cores).
constexpr double kMaxSplitLayerBytes = 2.0 * (1 << 20);

}  // namespace

std::vector<BatchPart> ModelRunner::PlanParts(const ModelInput& in,
                                              const ForwardOptions& options) const {
  const int32_t threads = backend_->max_concurrent_parts();
  if (threads <= 1 || !backend_->host_memory() || options.hook != nullptr ||
      !options.key_rows.empty() || !step_rope_.Uniform() || in.query_start_loc.size() < 3) {
    return {};
  }
  const ModelConfig& c = config();
  // Multiply-adds of a token in one layer: one per weight of the layer.
  const double per_token = static_cast<double>(c.dim) * (2.0 * c.q_dim() + 2.0 * c.kv_dim()) +
                           3.0 * c.dim * c.hidden_dim;
  if (per_token * sizeof(float) > kMaxSplitLayerBytes) return {};
  const double per_key = 2.0 * c.q_dim();  // a score and a weighted value per query head dim
  return SplitBatch(in.query_start_loc, in.kv_lens, threads,
                    {.per_token = per_token, .per_key = per_key});
}

absl::Status ModelRunner::RunLayersInParts(const ModelInput& in,
                                           const std::vector<BatchPart>& parts) {
  const ModelConfig& c = config();
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  // Each part's rows; its query_start_loc counted from its first token (host memory: the
  // backend runs parts only there).
  std::vector<std::vector<int32_t>> part_qsl(parts.size());
  std::vector<StepRows> rows(parts.size());
  const StepRows whole = WholeBatch(num_tokens, 0, in.max_blocks_per_seq);
  for (size_t p = 0; p < parts.size(); ++p) {
    const BatchPart& part = parts[p];
    for (int32_t s = part.first_seq; s <= part.end_seq; ++s) {
      part_qsl[p].push_back(in.query_start_loc[static_cast<size_t>(s)] - part.first_token);
    }
    const int64_t seq0 = part.first_seq;
    rows[p] = {.row0 = part.first_token,
               .num_rows = part.end_token - part.first_token,
               .num_seqs = part.end_seq - part.first_seq,
               .max_blocks_per_seq = in.max_blocks_per_seq,
               .positions = whole.positions + part.first_token,
               .slots = whole.slots + part.first_token,
               .query_start_loc = part_qsl[p].data(),
               .kv_lens = whole.kv_lens + seq0,
               .block_tables = whole.block_tables + seq0 * in.max_blocks_per_seq,
               .group_slots =
                   whole.group_slots == nullptr ? nullptr : whole.group_slots + part.first_token,
               .group_block_tables = whole.group_block_tables == nullptr
                                         ? nullptr
                                         : whole.group_block_tables + seq0 * in.max_blocks_per_seq,
               .group_slot_stride = whole.group_slot_stride,
               .group_table_stride = whole.group_table_stride};
  }
  for (int32_t l = 0; l <= c.n_layers; ++l) {
    PAGEDKV_RETURN_IF_ERROR(
        backend_->RunParts(static_cast<int32_t>(parts.size()), [&](int32_t p) -> absl::Status {
          const StepRows& part = rows[static_cast<size_t>(p)];
          if (l > 0) {
            PAGEDKV_RETURN_IF_ERROR(AttendAndMlp(layers_[static_cast<size_t>(l - 1)], l - 1, part));
          }
          if (l == c.n_layers) return absl::OkStatus();
          PAGEDKV_RETURN_IF_ERROR(ProjectQkv(layers_[static_cast<size_t>(l)], part));
          return backend_->ReshapeAndCache(KvWrite(l, part));
        }));
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
