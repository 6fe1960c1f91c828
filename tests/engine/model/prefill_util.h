// Copyright 2026 The pagedkv Authors.
//
// One prefill of a whole sequence through a ModelRunner, for the checkpoint tests: tokens at
// positions 0.., in blocks 0.. of the runner's block size (slots 0..).
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_PREFILL_UTIL_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_PREFILL_UTIL_H_

#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/runner/layer_hook.h"
#include "engine/model/runner/model_runner.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::testing {

// Every position's index, 0 .. n - 1 (the logits rows of a whole prefill).
inline std::vector<int32_t> AllRows(size_t n) {
  std::vector<int32_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

// The logits of `logits_rows` ([row][vocab]) after prefilling `ids`. REQUIRES: the runner has
// ceil(ids.size() / block_size) blocks.
inline absl::StatusOr<std::vector<float>> PrefillLogits(ModelRunner& runner,
                                                        const std::vector<TokenId>& ids,
                                                        const std::vector<int32_t>& logits_rows,
                                                        LayerHook* hook = nullptr) {
  const auto n = static_cast<int32_t>(ids.size());
  const int32_t block = runner.options().block_size;
  const std::vector<int32_t> positions = AllRows(ids.size());
  std::vector<int64_t> slots(ids.size());
  std::iota(slots.begin(), slots.end(), int64_t{0});
  std::vector<BlockId> table(static_cast<size_t>((n + block - 1) / block));
  std::iota(table.begin(), table.end(), 0);
  const std::vector<int32_t> qsl = {0, n}, kv_lens = {n};
  ModelOutput out;
  PAGEDKV_RETURN_IF_ERROR(runner.Forward({.token_ids = ids,
                                          .positions = positions,
                                          .slot_mapping = slots,
                                          .query_start_loc = qsl,
                                          .kv_lens = kv_lens,
                                          .block_tables = table,
                                          .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                                          .logits_indices = logits_rows},
                                         {.return_logits = true, .hook = hook}, &out));
  return out.logits;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_PREFILL_UTIL_H_
