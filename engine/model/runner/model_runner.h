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
// On a backend that runs parts at once (the CPU backend with threads, Backend::RunParts) a step of
// several sequences of a small model (a layer's weights within 2 MiB, so they stay in each core's
// cache) is split by sequences (engine/model/runner/batch_parts.h): each part runs a layer's
// ops on one thread over its own rows, so its activations stay in that core's cache and a layer
// costs two hand-offs instead of one per op. Every part writes a layer's K/V before any part
// attends in it, which keeps same-step prefix hits. Results are bit-identical to the whole-batch
// pass (each op computes a row the same way whatever the rows beside it). A step with a hook, or
// with per-sequence RoPE (dynamic NTK past max_position_embeddings), runs whole.
//
// A LayerHook (engine/model/runner/layer_hook.h, ForwardOptions::hook) is called at fixed points of
// every layer (before and after the layer's K/V write) and may drop rows from the rest of the pass;
// an extension such as selective recompute (engine/runtime/shift/cache_blend_hook.h) plugs in
// there.
//
// The runner owns the KV pages (K and V per layer, [num_blocks, block_size, n_kv_heads,
// head_dim] of options.kv_dtype and options.VDType(), separate tensors; with KV cache groups,
// options.layer_kv_group, one such array per layer of the largest group, shared by the groups, each
// through its own block tables and slots), the RoPE table and the activations, all in the backend's
// memory; it does not decide which slots a token uses (the scheduler / KV cache manager do). RoPE
// is llama2.c's (interleaved pairs, base 10000) unless options.rope overrides it.
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
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_MODEL_RUNNER_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/runner/backend.h"
#include "engine/model/runner/batch_parts.h"
#include "engine/model/runner/layer_hook.h"
#include "engine/model/runner/logit_edits.h"
#include "engine/model/runner/step_rope.h"
#include "pagedkv/dtype.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT ModelRunnerOptions {
  BackendKind backend = BackendKind::kAuto;  // where to compute (see backend_kind.h)
  int32_t num_blocks = 0;                    // KV blocks (per layer); > 0
  int32_t block_size = 16;                   // tokens per KV block; > 0
  DType kv_dtype = DType::kF32;              // storage type of the K pages (and V's by default)
  DType kv_dtype_v = kVDTypeOfK;             // storage type of the V pages (kVDTypeOfK: kv_dtype)
  DType VDType() const { return kv_dtype_v == kVDTypeOfK ? kv_dtype : kv_dtype_v; }
  // RoPE; unset: the model's (config.rope, e.g. a Hugging Face model's), else llama2.c's
  // (head_dim, interleaved pairs, config.rope_base, no scaling, max_position_embeddings =
  // seq_len). When set, head_dim must match the model's.
  std::optional<RopeConfig> rope = std::nullopt;
  // Positions held by the cos/sin table (beyond it RoPE is computed directly); 0: the context
  // length (ContextLength()).
  int64_t rope_table_positions = 0;
  // CPU backend threads, the caller included; 0: every hardware thread. Logits are bit-identical
  // for any count. In [0, 1024]; ignored by the CUDA backend.
  int32_t num_threads = 0;
  // Hybrid KV cache (vLLM's layout): [n_layers] KV cache group of each layer, groups 0..G-1 each
  // non-empty; empty: one group of every layer. Layer (group g, j-th of its group) reads and
  // writes page array j through group g's block tables and slots (ModelInput's group_* fields),
  // so the runner allocates max_g |group g| page arrays instead of n_layers.
  std::vector<int32_t> layer_kv_group = {};
  // How block-format weights (Q4_0 / Q4_1 / Q8_0) multiply the activations on the CPU backend:
  // kF32 (decoded weights times fp32 x) or kInt8 (x quantized per 32-value block, exact integer
  // dots; docs/kernels.md gives the error). Other weights, fp32 weights and CUDA ignore it.
  ActivationType activations = ActivationType::kF32;
};

// The model's trained context under `rope`: seq_len without scaling; seq_len * factor for linear
// and static NTK scaling, and for dynamic NTK in its per-step mode (dynamic_seq_len 0, Hugging
// Face's: see step_rope.h); max(seq_len, dynamic_seq_len) for dynamic NTK at a fixed length; the
// config's max_position_embeddings (the extended context) for YaRN and Llama-3.
PAGEDKV_EXPORT int64_t ContextLengthFor(const ModelConfig& model, const RopeConfig& rope);

// The checkpoint's RoPE (model.rope, e.g. a Hugging Face model's) when set, else llama2.c's for
// `model`: interleaved pairs, base model.rope_base, no scaling.
PAGEDKV_EXPORT RopeConfig DefaultRopeConfig(const ModelConfig& model);

// One step's flat batch, in host memory. T = token_ids.size(), n = query_start_loc.size() - 1.
struct PAGEDKV_EXPORT ModelInput {
  absl::Span<const TokenId> token_ids = {};        // [T], each in [0, vocab_size)
  absl::Span<const int32_t> positions = {};        // [T], each >= 0
  absl::Span<const int64_t> slot_mapping = {};     // [T], KV slot of each token (or -1: not stored)
  absl::Span<const int32_t> query_start_loc = {};  // [n + 1], 0 = first <= ... <= last = T
  absl::Span<const int32_t> kv_lens = {};       // [n], tokens in each sequence's KV after the step
  absl::Span<const BlockId> block_tables = {};  // [n, max_blocks_per_seq], row-major
  int32_t max_blocks_per_seq = 0;               // row stride of block_tables
  absl::Span<const int32_t> logits_indices = {};  // rows of the batch whose logits are wanted
  // With G > 1 KV cache groups (ModelRunnerOptions::layer_kv_group), groups 1..G-1; group 0 is
  // slot_mapping and block_tables above. [(G - 1) * T]: group g's slot of token t at
  // (g - 1) * T + t. [(G - 1) * n * max_blocks_per_seq]: group g's tables, each laid out as
  // block_tables; kNullBlock allowed for blocks wholly before a sliding-window group's window.
  absl::Span<const int64_t> group_slot_mapping = {};
  absl::Span<const BlockId> group_block_tables = {};
};

struct PAGEDKV_EXPORT ForwardOptions {
  bool return_logits = false;  // copy the logits rows to ModelOutput::logits
  // One per logits index: sample a token from each row into ModelOutput::sampled. Empty: no
  // sampling.
  absl::Span<const SamplingParams> sampling = {};
  // Logits rows (indexes into logits_indices) to copy to ModelOutput::row_logits, in this order
  // (the rows whose requests asked for logprobs). Each must be in [0, logits_indices.size()).
  // They, and ModelOutput::logits, are the raw logits: copied before logit_edits.
  absl::Span<const int32_t> copy_rows = {};
  // Edits applied to logits rows after the copies above and before sampling (logit_edits.h):
  // rows strictly increasing, each in [0, logits_indices.size()). Empty: none.
  absl::Span<const RowLogitEdits> logit_edits = {};
  // Called at fixed points of every layer (see layer_hook.h); null: a plain pass. Not owned.
  LayerHook* hook = nullptr;
  // Input rows (strictly increasing, each with a slot) whose keys the KV write hands back as it
  // rotated them, before the storage rounding, to ModelOutput::rotated_keys: the float keys a
  // caller keeps to move a chunk later without a second rounding (ReRotateArgs::src_keys). A hook
  // must not drop them (FailedPrecondition). Empty: none.
  absl::Span<const int32_t> key_rows = {};
};

struct PAGEDKV_EXPORT ModelOutput {
  std::vector<float> logits;      // [logits_indices.size(), vocab_size] when return_logits
  std::vector<TokenId> sampled;   // [logits_indices.size()] when sampling was requested
  std::vector<float> row_logits;  // [copy_rows.size(), vocab_size]
  // [n_layers, key_rows.size(), n_kv_heads * head_dim] when ForwardOptions::key_rows is set.
  std::vector<float> rotated_keys;
};

class PAGEDKV_EXPORT ModelRunner {
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
  // sequence's kv_len, and the hook's own Validate): on InvalidArgument nothing was written.
  // A hook's error is returned as is.
  absl::Status Forward(const ModelInput& input, const ForwardOptions& options, ModelOutput* output);

  // Copies the K and V of `slots` (each in [0, num_blocks * block_size)) in layer `layer` to the
  // host as fp32: k and v get [slots.size(), n_kv_heads, head_dim]. One batched gather
  // (GatherRows) for K and one for V, and on a device backend one copy to the host; quantized
  // pages are copied per slot and dequantized on the host. For hooks, studies and tests.
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
  // Parts the layers of the last Forward that reached them ran in: 1 when the step ran whole (see
  // the split pass above), 0 before any did.
  int32_t last_forward_parts() const { return last_forward_parts_; }
  // Bytes of KV pages over all layers (page arrays shared by KV cache groups counted once).
  int64_t kv_cache_bytes() const;
  // KV cache groups (1 unless options.layer_kv_group says more) and page arrays allocated.
  int32_t num_kv_groups() const { return num_kv_groups_; }
  int32_t num_kv_page_arrays() const { return static_cast<int32_t>(kv_pages_.size() / 2); }

 private:
  ModelRunner() = default;
  absl::Status Init();
  // The batch rows still in the pass (all of them unless a hook dropped some), host copies.
  struct ActiveRows {
    std::vector<int32_t> rows;             // input row of each current row, ascending
    std::vector<int32_t> positions;        // per current row
    std::vector<int64_t> slots;            // per current row
    std::vector<int32_t> query_start_loc;  // [num_seqs + 1] over the current rows
    std::vector<int32_t> logits_rows;      // current row of each logits index
  };
  static ActiveRows AllRows(const ModelInput& input);

  // Init steps.
  absl::Status BuildRopeTable();
  absl::StatusOr<const float*> PlaceTensor(const float* host, int64_t count);
  absl::Status PlaceWeights();
  absl::Status AllocateKvPages();
  // model_runner_groups.cc: checks options.layer_kv_group and fills layer_page_ / group_window_.
  absl::Status InitKvGroups();

  // ValidateInput steps (model_runner_validate.cc), in order: sizes of the spans; token ids and
  // slot ranges; each sequence's query range, kv_len, block table, positions and slots; logits
  // rows and sampling params.
  absl::Status ValidateInput(const ModelInput& input, const ForwardOptions& options) const;
  absl::Status ValidateShapes(const ModelInput& input) const;
  absl::Status ValidateTokens(const ModelInput& input) const;
  absl::Status ValidateSequence(const ModelInput& input, int64_t seq) const;
  absl::Status ValidateOutputs(const ModelInput& input, const ForwardOptions& options) const;
  // The group_* spans: sizes, slots and tables of groups 1..G-1 (model_runner_groups.cc).
  absl::Status ValidateGroups(const ModelInput& input, const ForwardOptions& options) const;
  absl::Status ValidateGroupSequence(const ModelInput& input, int32_t g, int64_t seq) const;
  // Uploads the group_* spans (growing their buffers).
  absl::Status UploadGroups(const ModelInput& input);
  absl::Status EnsureCapacity(int64_t num_tokens, int64_t num_seqs, int64_t num_blocks_entries,
                              int64_t num_logits);

  // Rows [row0, row0 + num_rows) of the activations and what attention needs of their
  // num_seqs sequences, in the backend's memory.
  struct StepRows {
    int64_t row0 = 0;
    int64_t num_rows = 0;
    int32_t num_seqs = 0;
    int32_t max_blocks_per_seq = 0;
    const int32_t* positions = nullptr;        // [num_rows]
    const int64_t* slots = nullptr;            // [num_rows]
    const int32_t* query_start_loc = nullptr;  // [num_seqs + 1], from 0
    const int32_t* kv_lens = nullptr;          // [num_seqs]
    const BlockId* block_tables = nullptr;     // [num_seqs, max_blocks_per_seq]
    // Groups 1..G-1: the same rows' slots / tables of group 1, group g at (g - 1) * stride.
    const int64_t* group_slots = nullptr;
    const BlockId* group_block_tables = nullptr;
    int64_t group_slot_stride = 0;   // tokens of the whole batch
    int64_t group_table_stride = 0;  // block table entries of the whole batch
  };
  // `rows` with the slots and block tables of layer `layer`'s KV cache group.
  StepRows ForLayer(const StepRows& rows, int32_t layer) const;
  // The current rows of the whole batch (the metadata buffers as uploaded or compacted).
  StepRows WholeBatch(int64_t num_rows, int32_t num_seqs, int32_t max_blocks_per_seq) const;

  // Forward steps, after the embedding gather into x_: every layer (compacting *active when the
  // hook drops rows), then the final norm and LM head on active->logits_rows, then sampling and
  // copies to the host.
  absl::Status RunLayers(const ModelInput& input, LayerHook* hook, ActiveRows* active);
  // The split pass (model_runner_parts.cc): the parts to run at once, none when the step runs
  // whole; then every layer, part by part.
  std::vector<BatchPart> PlanParts(const ModelInput& input, const ForwardOptions& options) const;
  absl::Status RunLayersInParts(const ModelInput& input, const std::vector<BatchPart>& parts);
  // RMSNorm and the Q, K, V projections of `rows`.
  absl::Status ProjectQkv(const LayerWeights& w, const StepRows& rows);
  // y [num_rows, n] = x [num_rows, dim] w^T (+ bias [n] on every row when bias is not null).
  absl::Status Project(const float* x, const float* w, const NativeMatrix& native,
                       const float* bias, float* y, int64_t num_rows, int64_t n);
  // x_ [num_tokens, dim] = the embedding rows of token_ids_ (a block-format table when the
  // weights keep it native).
  absl::Status GatherEmbeddings(int64_t num_tokens);
  // Declares the block-format matrices constant on a host-memory backend and has the backend
  // prepare them (the CPU backend's Int8Tiles, at load rather than in the first step); rows read
  // in place from the model file whose prepared copy alone is read then let their pages go
  // (ModelWeights::ReleaseInPlaceRows).
  absl::Status PrepareNativeMatrices();
  // args.w's product, or QuantLinear over `native` when that holds the matrix.
  absl::Status MatMul(const LinearArgs& args, const NativeMatrix& native);
  // RoPE of q and k of `rows` at their positions with the runner's table, K/V to their slots.
  ReshapeAndCacheArgs KvWrite(int32_t layer, const StepRows& rows) const;
  // RoPE + K/V write, with the hook's calls around it; *num_rows follows a compaction.
  absl::Status WriteKv(const ModelInput& input, int32_t layer, LayerHook* hook, ActiveRows* active,
                       int64_t* num_rows);
  // Sets up this Forward's key_rows (none: nothing): rotated_k_ grown to num_tokens rows and
  // output->rotated_keys sized.
  absl::Status PrepareKeyRows(absl::Span<const int32_t> key_rows, int64_t num_tokens,
                              ModelOutput* output);
  // After layer `layer`'s K/V write: the rotated keys of key_rows_ from rotated_k_ to
  // key_output_->rotated_keys. FailedPrecondition when a hook has dropped one of them.
  absl::Status CopyRotatedKeys(int32_t layer, const ActiveRows& active);
  // The K/V write of `all` split into runs of sequences that StepRope rotates alike (dynamic NTK
  // scaling past max_position_embeddings).
  absl::Status WriteKvPerSequence(const ReshapeAndCacheArgs& all, const ActiveRows& active);
  // Keeps the current rows `keep` (ascending): host metadata, then x, q and the device metadata.
  absl::Status CompactRows(const std::vector<int32_t>& keep, ActiveRows* active);
  absl::Status UploadCompacted(const std::vector<int32_t>& keep, const ActiveRows& active);
  // Attention, output projection, RMSNorm and SwiGLU MLP of `rows`.
  absl::Status AttendAndMlp(const LayerWeights& w, int32_t layer, const StepRows& rows);
  absl::Status RunHead(const std::vector<int32_t>& logits_rows);
  absl::Status CopyOutputs(const ForwardOptions& options, int64_t num_logits, ModelOutput* output);
  // The logits rows `rows` (validated) to output->row_logits.
  absl::Status CopyRows(absl::Span<const int32_t> rows, ModelOutput* output);
  // Each edited logits row (validated) down to the host, edited, and back up.
  absl::Status EditRows(absl::Span<const RowLogitEdits> edits);
  // ReadKv of quantized or mixed-dtype pages: each slot's bytes of K and of V (copied down on a
  // device), decoded here row by row.
  absl::Status ReadKvRowByRow(const PagedKvLayout& layout, absl::Span<const int64_t> slots,
                              std::vector<float>* k, std::vector<float>* v);
  // ReadKv on a device backend: slots up, two gathers, one copy down.
  absl::Status ReadKvThroughDevice(const PagedKvLayout& layout, absl::Span<const int64_t> slots,
                                   std::vector<float>* k, std::vector<float>* v);

  std::shared_ptr<const ModelWeights> weights_;
  ModelRunnerOptions options_;
  RopeConfig rope_config_;
  int64_t context_length_ = 0;
  std::unique_ptr<Backend> backend_;
  std::optional<RopeTable> rope_table_;
  RopeTableView rope_view_;
  StepRope step_rope_;  // this step's RoPE per sequence (differs only under dynamic NTK)
  int32_t last_forward_parts_ = 0;
  DeviceBuffer rope_cos_sin_, rope_inv_freq_;   // device copies (non-host backends)
  std::vector<DeviceBuffer> uploaded_weights_;  // device copies (non-host backends)
  std::vector<LayerWeights> layers_;            // pointers usable by the backend
  const float* token_embedding_ = nullptr;
  const float* rms_final_ = nullptr;
  const float* classifier_ = nullptr;
  NativeMatrix native_token_embedding_;  // block-format embedding / classifier (CPU backend only)
  NativeMatrix native_classifier_;
  std::vector<DeviceBuffer> kv_pages_;     // K then V per layer
  std::vector<PagedKvLayout> kv_layouts_;  // [n_layers], page array layer_page_[l]'s
  int32_t num_kv_groups_ = 1;
  std::vector<int32_t> layer_page_;    // [n_layers]: the layer's index within its group
  std::vector<int32_t> group_window_;  // [G]: smallest window of the group's layers (0: full)
  int64_t group_slot_capacity_ = 0, group_table_capacity_ = 0;
  int64_t token_count_ = 0, table_entry_count_ = 0;  // this Forward's T and block table entries
  DeviceBuffer group_slots_, group_block_tables_;    // ModelInput's group_* spans

  // Activations and batch metadata, grown on demand.
  int64_t token_capacity_ = 0, seq_capacity_ = 0, block_entry_capacity_ = 0, logits_capacity_ = 0;
  DeviceBuffer x_, xb_, q_, k_, v_, att_, hb_, hb2_, rows_, logits_;
  DeviceBuffer token_ids_, positions_, slots_, query_start_loc_, kv_lens_, block_tables_,
      logits_indices_, sampling_params_, sampled_;
  DeviceBuffer zero_ids_;  // [token capacity] zeros (qkv_bias): broadcasts a bias row
  DeviceBuffer gather_rows_, gather_scratch_;  // compaction: kept rows (int64), gathered rows
  // ForwardOptions::key_rows of the running Forward, where their keys go, and the KV write's
  // rotated keys ([rows, kv_dim], allocated for the first Forward that asks).
  absl::Span<const int32_t> key_rows_;
  ModelOutput* key_output_ = nullptr;
  int64_t rotated_k_capacity_ = 0;
  DeviceBuffer rotated_k_;
  int64_t kv_read_capacity_ = 0;              // slots kv_read_slots_ holds
  DeviceBuffer kv_read_slots_, kv_read_out_;  // ReadKv on a device: slots, K then V rows
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_MODEL_RUNNER_H_
