// Copyright 2026 The pagedkv Authors.
//
// Engine::StepBatch: one step's flattened batch for the model runner and what it samples. Built by
// the step loop (engine_step.cc), read by the output handling (engine_outputs.cc). Internal.
#ifndef PAGEDKV_ENGINE_RUNTIME_STEP_BATCH_H_
#define PAGEDKV_ENGINE_RUNTIME_STEP_BATCH_H_

#include <cstdint>
#include <vector>

#include "engine/model/runner/logit_edits.h"
#include "kernels/sample_math.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/types.h"

namespace pagedkv {

// One step's flattened batch for the runner: padded block tables, one logits row per sequence
// that samples.
struct Engine::StepBatch {
  int32_t max_blocks = 0;
  std::vector<BlockId> tables;  // [num_sequences, max_blocks]
  // Hybrid KV cache with G groups: groups 1..G-1's tables, [G - 1, num_sequences, max_blocks],
  // and slots, [G - 1, num_tokens] (ModelInput's group_* fields). Empty otherwise.
  std::vector<BlockId> group_tables;
  std::vector<int64_t> group_slots;
  std::vector<int32_t> kv_lens;
  std::vector<int32_t> logits_indices;
  std::vector<SamplingParams> sampling;  // per logits row
  // Per sequence that samples: its id, its sequence index in the batch, and its first logits row;
  // rows [row_start[i], row_start[i + 1]) are 1 + its draft tokens.
  std::vector<RequestId> sampled_ids;
  std::vector<int32_t> sampled_seqs;
  std::vector<int32_t> row_start = {0};
  // Logits rows of requests that asked for logprobs (ForwardOptions::copy_rows), and per logits
  // row its index among them (-1: not copied).
  std::vector<int32_t> copy_rows;
  std::vector<int32_t> copied_index;
  // Edits of the rows of requests that asked for min_tokens, logit_bias or penalties
  // (ForwardOptions::logit_edits), rows ascending.
  std::vector<RowLogitEdits> logit_edits;
  // Rows after every sampling row: the prompt positions of requests that asked for prompt
  // logprobs (row k of them predicts prompt token prompt_row_positions[k] + 1), each copied.
  struct PromptRow {
    RequestId request_id = 0;
    int32_t position = 0;
    int32_t copied = 0;  // its index among copy_rows
  };
  std::vector<PromptRow> prompt_rows;
  // With chunk float keys on: the batch rows holding tokens of chunks their requests will
  // register (ForwardOptions::key_rows, ascending), and per row the chunk token it is.
  struct KeyTarget {
    RequestId request_id = 0;
    int32_t chunk = 0;  // index into the request's chunks
    int32_t token = 0;  // token of the chunk
  };
  std::vector<int32_t> key_rows;
  std::vector<KeyTarget> key_targets;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_STEP_BATCH_H_
