// Copyright 2026 The pagedkv Authors.
//
// Internal to the shift study (engine/tools/study/shift_study.cc): sampling the study's texts from
// the model, and the per-dtype rig (model runner, pool, chunk index, shifted prefill) that runs
// them.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<StudyRig> rig,
//                            StudyRig::Create(weights, {.block_size = 16, .kv_dtype = kF16,
//                                                       .num_blocks = 256}));
//   PAGEDKV_ASSIGN_OR_RETURN(StudyRun run, rig->Run(tokens, {.chunk_begin = 16,
//                                                          .chunk_length = 32}, {}));
//   ... rig->runner().ReadKv(0, rig->Slots(run.table, 16, 32), &k, &v) ...
//   PAGEDKV_RETURN_IF_ERROR(rig->Free(run.table));
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_STUDY_RIG_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_STUDY_RIG_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "engine/tools/study/shifted_prefill.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/dtype.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/types.h"

namespace pagedkv {

// The study's texts start with this token, as the models were trained.
inline constexpr TokenId kStudyBos = 1;

// Samples `num_new` tokens after `prompt` (temperature 1, `seed`) on `runner`, whose blocks it
// uses freely from block 0. Returns the new tokens only.
// REQUIRES: the runner holds at least NumBlocksFor(prompt + num_new) blocks.
absl::StatusOr<std::vector<TokenId>> SampleTokens(ModelRunner& runner,
                                                  const std::vector<TokenId>& prompt,
                                                  int32_t num_new, uint64_t seed);

// BOS followed by `length` - 1 sampled tokens (empty when `length` is 0).
absl::StatusOr<std::vector<TokenId>> SampleDocument(ModelRunner& runner, int32_t length,
                                                    uint64_t seed);

struct StudyRigOptions {
  BackendKind backend = BackendKind::kCpu;  // where to compute
  int32_t block_size = 16;                  // tokens per KV block
  DType kv_dtype = DType::kF32;             // KV storage type
  int32_t num_blocks = 0;                   // blocks of the runner and the pool
};

// The one chunk of a study prefill.
struct StudyChunk {
  int32_t chunk_begin = 0;   // first position of the chunk in the tokens
  int32_t chunk_length = 0;  // its tokens
  int32_t logits_from = -1;  // first position whose logits are kept (-1: none)
};

// A finished prefill: its block table (pinned until StudyRig::Free) and its result.
struct StudyRun {
  std::vector<BlockId> table;
  ShiftedPrefillResult result;
};

// One dtype's model runner, pool, chunk index and shifted-prefill executor.
class StudyRig {
 public:
  static absl::StatusOr<std::unique_ptr<StudyRig>> Create(
      std::shared_ptr<const ModelWeights> weights, const StudyRigOptions& options);

  // A prefill of `tokens` with one chunk, in a newly allocated table kept until Free(table).
  // On error nothing stays allocated.
  absl::StatusOr<StudyRun> Run(const std::vector<TokenId>& tokens, const StudyChunk& chunk,
                               const ShiftedReuseOptions& options);

  // Unpins a table from Run (or allocated from pool()), tail first.
  absl::Status Free(const std::vector<BlockId>& table);

  // Slots of positions [begin, begin + count) of a sequence with `table`.
  std::vector<int64_t> Slots(const std::vector<BlockId>& table, int32_t begin, int32_t count) const;

  ModelRunner& runner() { return *runner_; }
  BlockPool& pool() { return *pool_; }
  ChunkIndex& index() { return *index_; }
  ShiftedPrefill& prefill() { return *prefill_; }

 private:
  StudyRig() = default;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<ChunkIndex> index_;
  std::unique_ptr<ShiftedPrefill> prefill_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_STUDY_RIG_H_
