// Copyright 2026 The pagedkv Authors.
//
// Checks of array CONTENTS (slots, positions, token ids, block tables, sampling params), as
// opposed to kernels/op_validate.h, which checks sizes and pointers only. The per-element
// predicates are PAGEDKV_HD: the CPU backend calls them from the Check*Contents functions below,
// the CUDA backend from its validation kernels (kernels/cuda/content_check.cu), so both backends
// accept and reject exactly the same inputs. The Check*Contents functions read host memory and
// return InvalidArgument naming the first bad entry; the CUDA backend calls them on a host copy of
// the arrays to word its message once its kernel has found a bad entry.
//
// Example:
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::CheckReshapeAndCacheContents(args));  // host pointers
//   if (!pagedkv::SlotValid(slot, cache.NumSlots(), /*allow_skip=*/true)) ...
#ifndef PAGEDKV_KERNELS_CONTENT_CHECKS_H_
#define PAGEDKV_KERNELS_CONTENT_CHECKS_H_

#include <math.h>

#include <cstdint>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/hd.h"
#include "pagedkv/kernels/bad_entry.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv {

// slot in [0, num_slots), or -1 when allow_skip.
PAGEDKV_HD bool SlotValid(int64_t slot, int64_t num_slots, bool allow_skip) {
  return (allow_skip && slot == -1) || (slot >= 0 && slot < num_slots);
}

// Positions are >= 0.
PAGEDKV_HD bool PositionValid(int64_t position) { return position >= 0; }

// Token id in [0, vocab_size).
PAGEDKV_HD bool TokenIdValid(int64_t id, int64_t vocab_size) { return id >= 0 && id < vocab_size; }

// kv_len in [1, capacity], capacity = max_blocks_per_seq * block_size.
PAGEDKV_HD bool KvLenValid(int64_t kv_len, int64_t capacity) {
  return kv_len >= 1 && kv_len <= capacity;
}

// Blocks of a block table a sequence of kv_len tokens uses (only those are checked).
PAGEDKV_HD int64_t UsedBlocks(int64_t kv_len, int32_t block_size) {
  return (kv_len + block_size - 1) / block_size;
}

// Block id in [0, num_blocks).
PAGEDKV_HD bool BlockIdValid(int64_t block, int64_t num_blocks) {
  return block >= 0 && block < num_blocks;
}

// Entry b (< UsedBlocks) of sequence s's block table: a block id in [0, num_blocks), or, with a
// sliding window, kNullBlock (-1) for a block wholly before the window of the sequence's earliest
// query, whose keys no query reads (a hybrid KV cache releases such blocks, issue #31). Reads
// the sequence's positions, clipped to [0, num_tokens).
PAGEDKV_HD bool AttentionTableEntryValid(const PagedAttentionArgs& a, int64_t s, int64_t b) {
  const int32_t block = a.block_tables[s * a.max_blocks_per_seq + b];
  if (BlockIdValid(block, a.cache.num_blocks)) return true;
  if (block != -1 || a.sliding_window <= 0) return false;
  const int64_t begin = a.query_start_loc[s] < 0 ? 0 : a.query_start_loc[s];
  const int64_t end =
      a.query_start_loc[s + 1] > a.num_tokens ? a.num_tokens : a.query_start_loc[s + 1];
  if (begin >= end) return false;
  int64_t first = a.positions[begin];
  for (int64_t t = begin + 1; t < end; ++t) first = a.positions[t] < first ? a.positions[t] : first;
  return (b + 1) * a.cache.block_size <= first - a.sliding_window + 1;
}

// Finite temperature (<= 0: greedy), top_p in (0, 1], top_k >= 0 and min_p in [0, 1].
PAGEDKV_HD bool SamplingParamsValid(const SamplingParams& p) {
  const bool finite = fabsf(p.temperature) <= 3.402823466e38f;  // false for inf and NaN
  return finite && p.top_p > 0.0f && p.top_p <= 1.0f && p.top_k >= 0 && p.min_p >= 0.0f &&
         p.min_p <= 1.0f;
}

// Host-memory content checks, each op's complete list in the CPU backend's order. REQUIRES: the
// op's size checks (kernels/op_validate.h) passed.
PAGEDKV_EXPORT absl::Status CheckRopeContents(const RopeArgs& args);
PAGEDKV_EXPORT absl::Status CheckReshapeAndCacheContents(const ReshapeAndCacheArgs& args);
PAGEDKV_EXPORT absl::Status CheckReRotateContents(const ReRotateArgs& args);
PAGEDKV_EXPORT absl::Status CheckEmbeddingGatherContents(const EmbeddingGatherArgs& args);
PAGEDKV_EXPORT absl::Status CheckPagedAttentionContents(const PagedAttentionArgs& args);
PAGEDKV_EXPORT absl::Status CheckSampleContents(const SampleArgs& args);

// The word a deferred check (pagedkv/kernels/bad_entry.h) records for host arrays: the smallest
// EncodeBadEntry over every bad entry, kNoBadEntry when there is none. The same predicates as the
// Check*Contents above, so the word is kNoBadEntry exactly when that check returns OK; the CUDA
// check kernels compute the same minimum. REQUIRES: as above.
PAGEDKV_EXPORT uint64_t FirstBadEntry(const RopeArgs& args);
PAGEDKV_EXPORT uint64_t FirstBadEntry(const ReshapeAndCacheArgs& args);
PAGEDKV_EXPORT uint64_t FirstBadEntry(const ReRotateArgs& args);
PAGEDKV_EXPORT uint64_t FirstBadEntry(const EmbeddingGatherArgs& args);
PAGEDKV_EXPORT uint64_t FirstBadEntry(const PagedAttentionArgs& args);
PAGEDKV_EXPORT uint64_t FirstBadEntry(const SampleArgs& args);

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_CONTENT_CHECKS_H_
