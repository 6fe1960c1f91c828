// Copyright 2026 The pagedkv Authors.
//
// Internal to ShiftedPrefill (shifted_prefill.cc, shifted_prefill_float_keys.cc): a cached chunk
// it found, the state of one Run passed between its steps, and a sequence's slot of a position.
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_SHIFTED_PREFILL_STATE_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_SHIFTED_PREFILL_STATE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/tools/study/shifted_prefill.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/types.h"

namespace pagedkv {

// The slot of `position` in a sequence with block table `table`.
inline int64_t SlotAt(std::span<const BlockId> table, int32_t block_size, int64_t position) {
  return int64_t{table[static_cast<size_t>(position / block_size)]} * block_size +
         position % block_size;
}

struct ShiftedPrefill::Hit {
  size_t span = 0;              // index into input.chunks
  ChunkLocation location;       // pinned while the Hit lives in the guard
  std::vector<int32_t> reused;  // chunk-relative indices filled from the cache
};

// The state of one Run, passed between its steps.
struct ShiftedPrefill::RunState {
  const ShiftedPrefillInput& input;
  const ShiftedReuseOptions& options;
  int32_t num_tokens = 0;               // of the prompt
  int32_t logits_from = 0;              // first position whose logits are returned
  std::vector<char> computed;           // [num_tokens] 1: the forward pass computes the token
  std::vector<Hit> hits;                // cached chunks found and pinned
  std::vector<ChunkLocation> acquired;  // pinned locations, released by the guard
  std::vector<int32_t> key_tokens;      // token of each key row of the compute pass
  std::vector<float> rotated_keys;      // their keys (ModelOutput::rotated_keys)
  ShiftedPrefillResult result;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_SHIFTED_PREFILL_STATE_H_
