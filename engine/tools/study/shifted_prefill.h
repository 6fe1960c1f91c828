// Copyright 2026 The pagedkv Authors.
//
// ShiftedPrefill: the prefill of one sequence whose prompt contains reusable chunks (documents,
// tool descriptions) that may be cached at OTHER positions. Plans and executes shifted-position
// reuse over a ModelRunner (the KV pages), a BlockPool (shared with the prefix cache) and a
// ChunkIndex:
//
//   1. plan:  for each marked span, ChunkKey(tokens, salt, adapter, RoPE fingerprint, model) is
//             looked up; a hit is pinned (ChunkIndex::Acquire) so it cannot be evicted while read;
//   2. reuse: for every reused token, every layer: K re-rotated from the cached position p0+i to
//             the new position p1+i (k' = R(p1+i) R(p0+i)^T k, fp32, one rounding to the storage
//             dtype) into the sequence's own slot, V copied, whatever the block alignment of the
//             old and new slots (kernels' ReRotate). Those tokens count as computed;
//   3. optional recompute (options): the first k tokens of each reused chunk (EPIC), and/or the
//             fraction of its tokens whose K/V deviate most at `deviation_layer` (CacheBlend) -
//             the tokens before the first reused chunk are computed first; a probe model made of
//             the first deviation_layer + 1 layers (LayerPrefixWeights) gets their KV copied and
//             computes its layers fresh, in context, for the chunks; the deviation of the reused
//             K/V from the probe's ranks the tokens;
//   4. compute: every other token runs through the model in ONE forward pass (each token with its
//             own position, so the reused tokens are holes that attention reads from the pages;
//             two passes with selective recompute, split at the first reused chunk);
//   5. register: each marked span computed fresh here is copied (exactly) into blocks of its own
//             and registered in the ChunkIndex at its position; those blocks are then unpinned,
//             evictable in the pool's order. When the compute pass produced every one of the
//             span's keys, their float values (as the KV write rotated them, before the storage
//             rounding) are kept too; options.from_float_keys then moves the chunk from them in
//             step 2: one rounding instead of two for a quantized or 16-bit KV dtype.
// The last prompt token and every token whose logits are wanted are always computed.
//
// The naive baseline (options.rerotate = false) copies cached keys WITHOUT re-rotation (they keep
// the rotation of their old positions): it exists only to show what re-rotation fixes.
//
// The caller allocates the sequence's block table (from the same pool) and owns its blocks.
// Not thread-safe.
//
// Example:
//   auto prefill = pagedkv::ShiftedPrefill::Create(runner.get(), pool.get(), index.get()).value();
//   std::vector<pagedkv::ChunkSpan> spans = {{.begin = 20, .length = 64}};  // a document
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::ShiftedPrefillResult r,
//                            prefill->Run({.tokens = prompt, .chunks = spans, .block_table =
//                            table},
//                                         {.recompute_first = 2}));
//   // r.logits: next-token logits after the prompt; r.num_reused_tokens tokens were not computed.
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_SHIFTED_PREFILL_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_SHIFTED_PREFILL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/shift/chunk_float_keys.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/types.h"

namespace pagedkv {

// A span of a prompt marked as a reusable chunk.
struct PAGEDKV_EXPORT ChunkSpan {
  int32_t begin = 0;   // index of its first token in the prompt (= its position)
  int32_t length = 0;  // tokens (> 0)
};

struct PAGEDKV_EXPORT ShiftedReuseOptions {
  bool enable_reuse = true;  // false: compute every token (full recompute; still registers)
  bool rerotate = true;      // false: naive baseline, keys copied without re-rotation (study only)
  ReRotateMode rotation = ReRotateMode::kCompose;  // R(p1) R(p0)^T, or R(p1 - p0) (kDelta)
  int32_t recompute_first = 0;      // EPIC: recompute the first k tokens of each reused chunk
  double recompute_fraction = 0.0;  // CacheBlend: recompute this fraction of each reused chunk's
                                    // tokens, those with the largest K/V deviation
  int32_t deviation_layer = 1;      // layer whose K/V deviation ranks tokens (clamped to the last)
  bool register_chunks = true;      // register spans computed fresh in the ChunkIndex
  // Reuse: re-rotate a cached chunk from the float keys kept when it was registered (step 5), when
  // there are some; its rounded keys otherwise.
  bool from_float_keys = false;
};

struct PAGEDKV_EXPORT ShiftedPrefillInput {
  std::span<const TokenId> tokens = {};       // the prompt; token i sits at position i
  std::span<const ChunkSpan> chunks = {};     // sorted by begin, non-overlapping, inside tokens
  std::span<const BlockId> block_table = {};  // blocks covering every token (caller-allocated)
  std::string_view cache_salt = {};           // chunks are shared only within one salt
  uint64_t adapter_id = 0;                    // LoRA adapter id; 0 = none
  // Logits are returned for every token index >= logits_from; -1: the last token only.
  int32_t logits_from = -1;
};

// What happened to one marked span.
struct PAGEDKV_EXPORT ChunkReuseRecord {
  int32_t begin = 0;            // span begin (its new position p1)
  int32_t length = 0;           // span length
  bool hit = false;             // found in the ChunkIndex (and reused)
  int32_t cached_position = 0;  // p0 of the cached copy (when hit)
  int32_t num_reused = 0;       // tokens filled from the cache
  int32_t num_recomputed = 0;   // tokens of a hit recomputed (first-k, selective, forced)
  bool registered = false;      // computed here and registered
};

struct PAGEDKV_EXPORT ShiftedPrefillResult {
  std::vector<float> logits;        // [rows, vocab_size]: tokens >= logits_from (or the last)
  int32_t logits_from = 0;          // token index of logits row 0
  int64_t num_computed_tokens = 0;  // tokens run through every layer
  int64_t num_reused_tokens = 0;    // tokens filled by re-rotation / copy (count as computed)
  // Tokens this executor ran through the probe: from the first reused chunk to the last reused
  // token (the KV before it is computed first by the main pass and copied into the probe).
  int64_t num_probe_tokens = 0;
  int32_t probe_layers = 0;  // layers of the probe (0: no probe)
  // Layer-token work of the method over a full prefill's (N tokens x L layers): computed tokens x L
  // plus, with selective recompute, reused tokens x probe_layers (CacheBlend computes the first
  // layers of every chunk token). The probe also repeats its layers for the computed tokens inside
  // its range (first-k tokens, tokens between chunks), which a layer-granular engine would share.
  double compute_fraction = 1.0;
  std::vector<ChunkReuseRecord> chunks;  // one per marked span, in order
};

class PAGEDKV_EXPORT ShiftedPrefill {
 public:
  // `runner`, `pool` and `index` are not owned and must outlive this object; the pool must be the
  // one `index` was created over and have the runner's num_blocks and block_size
  // (InvalidArgument otherwise).
  static absl::StatusOr<std::unique_ptr<ShiftedPrefill>> Create(ModelRunner* runner,
                                                                BlockPool* pool, ChunkIndex* index);

  ~ShiftedPrefill();
  ShiftedPrefill(const ShiftedPrefill&) = delete;
  ShiftedPrefill& operator=(const ShiftedPrefill&) = delete;

  // Prefills `input` with shifted reuse per `options` (see the banner). InvalidArgument (nothing
  // written, nothing pinned) for malformed spans, a block table that does not cover the prompt,
  // blocks that are not held, bad options or a bad logits_from. Errors of the model or the pool
  // are passed through; every chunk pinned by the call is released on every path.
  absl::StatusOr<ShiftedPrefillResult> Run(const ShiftedPrefillInput& input,
                                           const ShiftedReuseOptions& options);

  // The key of `tokens` under this runner's model and RoPE configuration.
  BlockHash KeyOf(std::span<const TokenId> tokens, std::string_view cache_salt,
                  uint64_t adapter_id) const;

  // Model fingerprint put into chunk keys: the model shape and the KV storage dtype.
  const std::string& model_fingerprint() const { return model_fingerprint_; }

 private:
  struct Hit;
  struct RunState;
  ShiftedPrefill(ModelRunner* runner, BlockPool* pool, ChunkIndex* index);
  absl::Status Validate(const ShiftedPrefillInput& input, const ShiftedReuseOptions& options) const;
  absl::StatusOr<ModelRunner*> Probe(int32_t num_layers);
  // Runs the probe over [start, last reused token] (copying the KV of [0, start) from the main
  // pages) and moves the most deviating reused tokens of each hit to `computed`.
  absl::Status SelectByDeviation(RunState& run, int32_t start);
  // Copies the main pages' KV of the first `num_blocks` blocks of the sequence into the probe's
  // layers [0, num_layers).
  absl::Status CopyKvToProbe(const ShiftedPrefillInput& input, ModelRunner& probe,
                             int32_t num_layers, int32_t num_blocks);
  // Moves the reused tokens of `hit` whose K/V at `layer` deviate most between the main pass and
  // the probe to `run.computed`.
  absl::Status DropMostDeviating(RunState& run, ModelRunner& probe, int32_t layer, Hit& hit);
  // The steps of Run: find and pin cached chunks; re-rotate them into the sequence; CacheBlend's
  // selective recompute (returns the tokens computed before it); compute the rest; register the
  // spans computed here.
  void PlanHits(RunState& run);
  absl::Status ReuseHits(RunState& run);
  absl::StatusOr<int32_t> RecomputeSelected(RunState& run);
  absl::Status ComputeRest(RunState& run, int32_t done);
  absl::Status RegisterComputed(RunState& run);
  absl::Status RegisterChunk(const ShiftedPrefillInput& input, const ChunkSpan& span,
                             ChunkReuseRecord& record);
  // Float keys (shifted_prefill_float_keys.cc). The rows of the compute pass over `indices` whose
  // keys are kept: the tokens of spans this run will register. Records them in `run`.
  std::vector<int32_t> KeyRows(RunState& run, std::span<const int32_t> indices) const;
  // Keeps chunk `key`'s float keys (span `span`, registered now) from the compute pass, or drops
  // an older copy's when the pass did not compute all of them.
  void KeepFloatKeys(const RunState& run, const ChunkSpan& span, const BlockHash& key);
  // With options.from_float_keys: moves `hit` from its kept float keys; false when it has none.
  absl::StatusOr<bool> MoveFromFloatKeys(const RunState& run, const Hit& hit);

  ModelRunner* runner_;
  BlockPool* pool_;
  ChunkIndex* index_;
  std::string model_fingerprint_;
  std::string rope_fingerprint_;
  std::unique_ptr<ModelRunner> probe_;  // first deviation_layer + 1 layers, built on demand
  // Registered chunks' float keys, by chunk key (a study registers few chunks: all are kept).
  ChunkFloatKeys float_keys_{int64_t{1} << 30};
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_SHIFTED_PREFILL_H_
