// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/study_rig.h"

#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cache/debug_check.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::StatusOr<std::vector<TokenId>> SampleTokens(ModelRunner& runner,
                                                  const std::vector<TokenId>& prompt,
                                                  int32_t num_new, uint64_t seed) {
  const int32_t block_size = runner.options().block_size;
  const auto total = static_cast<int32_t>(prompt.size()) + num_new;
  const auto blocks = static_cast<int32_t>(NumBlocksFor(total, block_size));
  if (blocks > runner.options().num_blocks) {
    return absl::InternalError("SampleTokens: generator runner too small");
  }
  std::vector<BlockId> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::vector<TokenId> all = prompt;
  std::vector<TokenId> sampled;
  int32_t done = 0;  // tokens whose K/V are written
  while (static_cast<int32_t>(sampled.size()) < num_new) {
    const auto end = static_cast<int32_t>(all.size());
    std::vector<int32_t> positions(static_cast<size_t>(end - done));
    std::iota(positions.begin(), positions.end(), done);
    const std::vector<int64_t> slots(positions.begin(), positions.end());  // identity table
    const std::vector<int32_t> query_start = {0, end - done}, kv_lens = {end};
    const std::vector<int32_t> logits_rows = {end - done - 1};
    const SamplingParams params{.temperature = 1.0f,
                                .top_p = 1.0f,
                                .seed = seed,
                                .counter = static_cast<uint64_t>(sampled.size())};
    ModelOutput output;
    PAGEDKV_RETURN_IF_ERROR(runner.Forward(
        {.token_ids = absl::MakeConstSpan(all.data() + done, static_cast<size_t>(end - done)),
         .positions = positions,
         .slot_mapping = slots,
         .query_start_loc = query_start,
         .kv_lens = kv_lens,
         .block_tables = table,
         .max_blocks_per_seq = blocks,
         .logits_indices = logits_rows},
        {.sampling = absl::MakeConstSpan(&params, 1)}, &output));
    done = end;
    all.push_back(output.sampled[0]);
    sampled.push_back(output.sampled[0]);
  }
  return sampled;
}

absl::StatusOr<std::vector<TokenId>> SampleDocument(ModelRunner& runner, int32_t length,
                                                    uint64_t seed) {
  if (length == 0) return std::vector<TokenId>{};
  std::vector<TokenId> document = {kStudyBos};
  if (length == 1) return document;
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> rest,
                           SampleTokens(runner, document, length - 1, seed));
  document.insert(document.end(), rest.begin(), rest.end());
  return document;
}

absl::StatusOr<std::unique_ptr<StudyRig>> StudyRig::Create(
    std::shared_ptr<const ModelWeights> weights, const StudyRigOptions& options) {
  auto rig = std::unique_ptr<StudyRig>(new StudyRig());
  PAGEDKV_ASSIGN_OR_RETURN(
      rig->runner_, ModelRunner::Create(std::move(weights), {.backend = options.backend,
                                                             .num_blocks = options.num_blocks,
                                                             .block_size = options.block_size,
                                                             .kv_dtype = options.kv_dtype}));
  PAGEDKV_ASSIGN_OR_RETURN(rig->pool_, BlockPool::Create({.num_blocks = options.num_blocks,
                                                          .block_size = options.block_size}));
  PAGEDKV_ASSIGN_OR_RETURN(rig->index_, ChunkIndex::Create(rig->pool_.get()));
  PAGEDKV_ASSIGN_OR_RETURN(
      rig->prefill_,
      ShiftedPrefill::Create(rig->runner_.get(), rig->pool_.get(), rig->index_.get()));
  return rig;
}

absl::StatusOr<StudyRun> StudyRig::Run(const std::vector<TokenId>& tokens, const StudyChunk& chunk,
                                       const ShiftedReuseOptions& options) {
  const int32_t block_size = pool_->block_size();
  StudyRun run;
  PAGEDKV_RETURN_IF_ERROR(pool_->Allocate(
      static_cast<int32_t>(NumBlocksFor(static_cast<int64_t>(tokens.size()), block_size)),
      &run.table));
  const std::vector<ChunkSpan> spans = {{.begin = chunk.chunk_begin, .length = chunk.chunk_length}};
  absl::StatusOr<ShiftedPrefillResult> result = prefill_->Run({.tokens = tokens,
                                                               .chunks = spans,
                                                               .block_table = run.table,
                                                               .logits_from = chunk.logits_from},
                                                              options);
  if (!result.ok()) {
    DebugCheckOk(Free(run.table), "the table was allocated just above");
    return result.status();
  }
  run.result = *std::move(result);
  return run;
}

absl::Status StudyRig::Free(const std::vector<BlockId>& table) {
  const std::vector<BlockId> tail_first(table.rbegin(), table.rend());
  return pool_->Unpin(tail_first);
}

std::vector<int64_t> StudyRig::Slots(const std::vector<BlockId>& table, int32_t begin,
                                     int32_t count) const {
  const int32_t block_size = pool_->block_size();
  std::vector<int64_t> slots;
  slots.reserve(static_cast<size_t>(count));
  for (int32_t position = begin; position < begin + count; ++position) {
    slots.push_back(int64_t{table[static_cast<size_t>(position / block_size)]} * block_size +
                    position % block_size);
  }
  return slots;
}

}  // namespace pagedkv
