// Copyright 2026 The pagedkv Authors.
//
// ModelRunner: one forward pass of a llama2.c (Llama-architecture) model over a flat batch of
// tokens whose KV lives in paged memory. Each token carries its own position and KV slot, so a
// batch mixes prefill chunks and decode tokens of many sequences:
//
//   embedding gather
//   per layer: RMSNorm; Q, K, V projections; RoPE of q and k at each token's position with the
//              K/V write to slot_mapping; paged causal attention (GQA) through each sequence's
//              block table; output projection + residual; RMSNorm; SwiGLU MLP + residual
//   final RMSNorm and LM head on the rows whose logits are wanted; sampling
//
// Within a layer the K/V of every token of the batch is written before that layer's attention
// runs, so a sequence may attend to KV that another sequence of the same batch computes in this
// step (a same-step prefix hit, see ScheduledBatch).
//
// CacheBlend's selective recompute (ModelInput::blend_groups): rows of a group already have K/V in
// their slots at every layer (e.g. re-rotated from a chunk cached at another position). They run
// through layers 0..blend_layer like every row, overwriting those layers' K/V with fresh values;
// at blend_layer the fresh K/V is compared with the K/V the slots held before (saved just before
// it is overwritten) and only the num_keep most deviating rows of each group go on through the
// later layers (the batch is compacted right after blend_layer's K/V write). The others keep their
// old K/V in the layers above blend_layer. With num_keep == num_rows the pass equals a plain one.
//
// The runner owns the KV pages (K and V per layer, [num_blocks, block_size, n_kv_heads,
// head_dim] of options.kv_dtype), the RoPE table and the activations, all in the backend's
// memory; it does not decide which slots a token uses (the scheduler / KV cache manager do).
// RoPE is llama2.c's (interleaved pairs, base 10000) unless options.rope overrides it.
//
// Example (one sequence of 3 prompt tokens in block 0, block_size 16):
//   PAGEDKV_ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(weights, {.num_blocks = 64}));
//   std::vector<TokenId> ids = {1, 42, 7};
//   std::vector<int32_t> pos = {0, 1, 2}, qsl = {0, 3}, lens = {3}, table = {0}, rows = {2};
//   std::vector<int64_t> slots = {0, 1, 2};
//   ModelInput in{.token_ids = ids, .positions = pos, .slot_mapping = slots,
//                 .query_start_loc = qsl, .kv_lens = lens, .block_tables = table,
//                 .max_blocks_per_seq = 1, .logits_indices = rows};
//   ModelOutput out;
//   PAGEDKV_RETURN_IF_ERROR(runner->Forward(in, {.return_logits = true}, &out));
//   // out.logits: [1, vocab_size], the next-token logits after token 7.
//
// Not thread-safe.
#ifndef PAGEDKV_ENGINE_MODEL_MODEL_RUNNER_H_
#define PAGEDKV_ENGINE_MODEL_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/backend.h"
#include "pagedkv/backend_kind.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/model_config.h"
#include "pagedkv/model_weights.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct ModelRunnerOptions {
  BackendKind backend = BackendKind::kAuto;  // where to compute (see backend_kind.h)
  int32_t num_blocks = 0;                    // KV blocks (per layer); > 0
  int32_t block_size = 16;                   // tokens per KV block; > 0
  DType kv_dtype = DType::kF32;              // storage type of the KV pages
  // RoPE; unset: llama2.c's (head_dim, interleaved pairs, config.rope_base, no scaling,
  // max_position_embeddings = seq_len). When set, head_dim must match the model's.
  std::optional<RopeConfig> rope = std::nullopt;
  // Positions held by the cos/sin table (beyond it RoPE is computed directly); 0: the context
  // length (ContextLength()).
  int64_t rope_table_positions = 0;
};

// The model's trained context under `rope`: seq_len without scaling; seq_len * factor for linear
// and static NTK scaling; max(seq_len, dynamic_seq_len) for dynamic NTK; and the config's
// max_position_embeddings (the extended context) for YaRN and Llama-3.
int64_t ContextLengthFor(const ModelConfig& model, const RopeConfig& rope);

// llama2.c's RoPE for `model`: interleaved pairs, base model.rope_base, no scaling.
RopeConfig DefaultRopeConfig(const ModelConfig& model);

// A group of batch rows for CacheBlend's selective recompute (see the banner).
struct BlendGroup {
  int32_t first_row = 0;  // first batch row of the group
  int32_t num_rows = 0;   // rows [first_row, first_row + num_rows), all of one sequence; >= 1
  int32_t num_keep = 0;   // most deviating rows that go on past blend_layer; in [0, num_rows]
};

// How many of `n` tokens CacheBlend recomputes at `fraction`: ceil(fraction * n) in [0, n].
// REQUIRES: 0 <= fraction <= 1, n >= 0.
int32_t NumToRecompute(double fraction, int32_t n);

// The `count` tokens whose K/V deviates most between copy a and copy b, as ascending indices.
// Token j's deviation is the sum, in double, of the squared differences of its `width` K elements
// and its `width` V elements (CacheBlend's KV deviation; ShiftedPrefill and the runner's blend
// both rank with it); ties go to the smaller index. Spans are [num_tokens, width], row-major.
// REQUIRES: the four spans have the same size, a multiple of width > 0; 0 <= count <= num_tokens.
std::vector<int32_t> MostDeviatingTokens(std::span<const float> k_a, std::span<const float> v_a,
                                         std::span<const float> k_b, std::span<const float> v_b,
                                         int64_t width, int32_t count);

// One step's flat batch, in host memory. T = token_ids.size(), n = query_start_loc.size() - 1.
struct ModelInput {
  absl::Span<const TokenId> token_ids = {};        // [T], each in [0, vocab_size)
  absl::Span<const int32_t> positions = {};        // [T], each >= 0
  absl::Span<const int64_t> slot_mapping = {};     // [T], KV slot of each token (or -1: not stored)
  absl::Span<const int32_t> query_start_loc = {};  // [n + 1], 0 = first <= ... <= last = T
  absl::Span<const int32_t> kv_lens = {};       // [n], tokens in each sequence's KV after the step
  absl::Span<const BlockId> block_tables = {};  // [n, max_blocks_per_seq], row-major
  int32_t max_blocks_per_seq = 0;               // row stride of block_tables
  absl::Span<const int32_t> logits_indices = {};  // rows of the batch whose logits are wanted
  // CacheBlend groups (see the banner): sorted by first_row, non-overlapping, each inside one
  // sequence, with slots (not -1) and no row in logits_indices. Empty: a plain pass.
  absl::Span<const BlendGroup> blend_groups = {};
  int32_t blend_layer = 0;  // layer whose K/V deviation ranks the groups' rows; [0, n_layers)
};

struct ForwardOptions {
  bool return_logits = false;  // copy the logits rows to ModelOutput::logits
  // One per logits index: sample a token from each row into ModelOutput::sampled. Empty: no
  // sampling.
  absl::Span<const SamplingParams> sampling = {};
};

struct ModelOutput {
  std::vector<float> logits;     // [logits_indices.size(), vocab_size] when return_logits
  std::vector<TokenId> sampled;  // [logits_indices.size()] when sampling was requested
  // With blend groups: their rows that went through every layer (selected), ascending.
  std::vector<int32_t> blend_kept_rows;
};

class ModelRunner {
 public:
  // Uploads the weights (CPU: used in place), allocates the KV pages and builds the RoPE table.
  // InvalidArgument for bad options (num_blocks, block_size, a RoPE config that fails Validate()
  // or whose head_dim differs from the model's), Unavailable when the backend cannot be created,
  // ResourceExhausted when memory runs out. `weights` stays shared with the caller.
  static absl::StatusOr<std::unique_ptr<ModelRunner>> Create(
      std::shared_ptr<const ModelWeights> weights, const ModelRunnerOptions& options);

  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Runs the batch: writes each token's K/V to its slot, and (per options) returns logits and/or
  // sampled tokens for input.logits_indices. The whole input is validated first (shapes, token
  // ids, positions, slots, block tables covering every kv position, a position below each
  // sequence's kv_len, blend groups): on InvalidArgument nothing was written.
  absl::Status Forward(const ModelInput& input, const ForwardOptions& options, ModelOutput* output);

  // Copies the K and V of `slots` (each in [0, num_blocks * block_size)) in layer `layer` to the
  // host as fp32: k and v get [slots.size(), n_kv_heads, head_dim]. For studies and tests.
  absl::Status ReadKv(int32_t layer, absl::Span<const int64_t> slots, std::vector<float>* k,
                      std::vector<float>* v);

  const ModelConfig& config() const { return weights_->config(); }
  const ModelWeights& weights() const { return *weights_; }
  const ModelRunnerOptions& options() const { return options_; }
  const RopeConfig& rope_config() const { return rope_config_; }
  // The RoPE table in the backend's memory (what ReshapeAndCache / ReRotate take).
  const RopeTableView& rope_view() const { return rope_view_; }
  // Layer `layer`'s KV pages in the backend's memory. REQUIRES: 0 <= layer < n_layers.
  const PagedKvLayout& kv_layout(int32_t layer) const {
    return kv_layouts_[static_cast<size_t>(layer)];
  }
  // Trained context length under rope_config() (see ContextLengthFor).
  int64_t context_length() const { return context_length_; }
  Backend& backend() { return *backend_; }
  // Bytes of KV pages over all layers.
  int64_t kv_cache_bytes() const;

 private:
  ModelRunner() = default;
  absl::Status Init();
  absl::Status ValidateInput(const ModelInput& input, const ForwardOptions& options) const;
  absl::Status EnsureCapacity(int64_t num_tokens, int64_t num_seqs, int64_t num_blocks_entries,
                              int64_t num_logits);
  // Runs the layers; with blend groups the batch is compacted after blend_layer: `logits_rows`
  // gets input.logits_indices renumbered for the compacted batch and `kept_rows` the blend rows
  // kept (both untouched without groups).
  absl::Status RunLayers(const ModelInput& input, std::vector<int32_t>* logits_rows,
                         std::vector<int32_t>* kept_rows);
  // Blend at layer `layer` after its Q/K/V projection: saves the groups' old K/V, writes the K/V
  // of the `*num_rows` rows, ranks and compacts x, q and the row metadata to the kept rows.
  absl::Status BlendAndCompact(const ModelInput& input, int32_t layer,
                               const ReshapeAndCacheArgs& write, int64_t* num_rows,
                               std::vector<int32_t>* logits_rows, std::vector<int32_t>* kept_rows);
  absl::Status ValidateBlend(const ModelInput& input) const;

  std::shared_ptr<const ModelWeights> weights_;
  ModelRunnerOptions options_;
  RopeConfig rope_config_;
  int64_t context_length_ = 0;
  std::unique_ptr<Backend> backend_;
  std::optional<RopeTable> rope_table_;
  RopeTableView rope_view_;
  DeviceBuffer rope_cos_sin_, rope_inv_freq_;   // device copies (non-host backends)
  std::vector<DeviceBuffer> uploaded_weights_;  // device copies (non-host backends)
  std::vector<LayerWeights> layers_;            // pointers usable by the backend
  const float* token_embedding_ = nullptr;
  const float* rms_final_ = nullptr;
  const float* classifier_ = nullptr;
  std::vector<DeviceBuffer> kv_pages_;  // K then V per layer
  std::vector<PagedKvLayout> kv_layouts_;

  // Activations and batch metadata, grown on demand.
  int64_t token_capacity_ = 0, seq_capacity_ = 0, block_entry_capacity_ = 0, logits_capacity_ = 0;
  DeviceBuffer x_, xb_, q_, k_, v_, att_, hb_, hb2_, rows_, logits_;
  DeviceBuffer token_ids_, positions_, slots_, query_start_loc_, kv_lens_, block_tables_,
      logits_indices_, sampling_params_, sampled_;
  DeviceBuffer blend_rows_, blend_scratch_;  // CacheBlend compaction: kept rows, gathered rows
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_MODEL_RUNNER_H_
