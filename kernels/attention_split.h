// Copyright 2026 The pagedkv Authors.
//
// Key ranges of paged attention, shared by the CPU reference and the CUDA kernels: the causal
// limit of a query token, the split of a sequence's keys into partitions (split-K, "flash
// decoding"), and the heuristic that picks the number of partitions.
//
// A query token at position p of a sequence with kv_len cached tokens attends to keys
// [first, last], first = AttentionFirstKey(...) (0 without a sliding window), last =
// AttentionLastKey(...). Split-K tiles each token's range from its first key: partition i covers
// [first + i * partition_size, first + (i + 1) * partition_size) clipped to last (possibly empty,
// past the causal limit), so num_partitions * partition_size >= the most keys any token reads
// (at most kv_len, and at most the window) covers every range. Each partition
// yields a partial OnlineSoftmax state and accumulator; MergeAttentionState
// (kernels/softmax_math.h) combines them.
//
// Example:
//   AttentionSplit split = ChooseAttentionSplit({.max_keys = 16384, .base_blocks = 256,
//                                                .num_sms = 132, .partial_bytes = 32 * 130 * 4});
//   int64_t begin, end;
//   PartitionKeyRange(AttentionFirstKey(true, window, pos), AttentionLastKey(true, pos, kv_len),
//                     split.partition_size, i, &begin, &end);
#ifndef PAGEDKV_KERNELS_ATTENTION_SPLIT_H_
#define PAGEDKV_KERNELS_ATTENTION_SPLIT_H_

#include <cstdint>

#include "pagedkv/export.h"
#include "pagedkv/hd.h"

namespace pagedkv {

// Last key position (inclusive) a query token at `position` reads in a sequence of `kv_len`
// cached tokens: min(position, kv_len - 1) when causal, kv_len - 1 otherwise.
// REQUIRES: position >= 0, kv_len >= 1.
PAGEDKV_HD int64_t AttentionLastKey(bool causal, int64_t position, int64_t kv_len) {
  return causal && position < kv_len ? position : kv_len - 1;
}

// First key position (inclusive) a query token at `position` reads under a sliding window of
// `window` keys (0: full attention): transformers' sliding-window causal mask, query i attends key
// j iff j <= i and i - j < window, so first = max(0, position - window + 1). 0 when not causal or
// window <= 0 (the window is a causal mask; ValidatePagedAttention refuses it without causal).
// REQUIRES: position >= 0.
PAGEDKV_HD int64_t AttentionFirstKey(bool causal, int64_t window, int64_t position) {
  if (!causal || window <= 0) return 0;
  const int64_t first = position - window + 1;
  return first > 0 ? first : 0;
}

// Keys [*begin, *end) of partition `partition` for a token reading keys [first_key, last_key]:
// [first_key + partition * partition_size, + partition_size) clipped to last_key; empty
// (*begin >= *end) when it starts past the token's causal limit. Partitions 0 .. n - 1 cover the
// token's keys exactly once when n * partition_size >= last_key - first_key + 1.
PAGEDKV_HD void PartitionKeyRange(int64_t first_key, int64_t last_key, int64_t partition_size,
                                  int64_t partition, int64_t* begin, int64_t* end) {
  *begin = first_key + partition * partition_size;
  const int64_t stop = *begin + partition_size;
  *end = stop < last_key + 1 ? stop : last_key + 1;
}

// PartitionKeyRange for keys [0, last_key] (full attention).
PAGEDKV_HD void PartitionKeyRange(int64_t last_key, int64_t partition_size, int64_t partition,
                                  int64_t* begin, int64_t* end) {
  PartitionKeyRange(0, last_key, partition_size, partition, begin, end);
}

// Inputs of the split-K heuristic.
struct PAGEDKV_EXPORT AttentionSplitInputs {
  int64_t max_keys = 0;     // upper bound of any token's keys (max kv_len or capacity; the window)
  int64_t base_blocks = 0;  // CUDA blocks without split: tokens x kv heads x head tiles
  int32_t num_sms = 1;      // streaming multiprocessors of the device
  int64_t partial_bytes = 0;  // workspace bytes one partition needs (all tokens and q heads)
};

// Result: keys per partition and the number of partitions (1: no split, no merge pass).
struct PAGEDKV_EXPORT AttentionSplit {
  int32_t num_partitions = 1;  // partitions per (token, head); 1 means no split
  int64_t partition_size = 0;  // keys per partition; num_partitions * partition_size >= max_keys
};

// Heuristic, in order:
//  1. parallelism: aim for kSplitBlocksPerSm blocks per SM, so split only when base_blocks is
//     below that: want = ceil(kSplitBlocksPerSm * num_sms / base_blocks);
//  2. length: no partition shorter than kMinPartitionKeys keys (merging costs a pass over
//     (num_partitions x head_dim) floats per head, worth it only for long ranges):
//     num_partitions <= floor(max_keys / kMinPartitionKeys);
//  3. bounds: at most kMaxPartitions, and the partials (num_partitions * partial_bytes) within
//     kMaxSplitWorkspaceBytes;
// then partition_size = ceil(max_keys / num_partitions) rounded up to a multiple of 16 keys, and
// num_partitions recomputed from it (never more partitions than needed to cover max_keys).
inline constexpr int32_t kSplitBlocksPerSm = 8;
inline constexpr int64_t kMinPartitionKeys = 256;
inline constexpr int32_t kMaxPartitions = 256;
inline constexpr int64_t kMaxSplitWorkspaceBytes = int64_t{256} << 20;

PAGEDKV_HD AttentionSplit ChooseAttentionSplit(const AttentionSplitInputs& in) {
  AttentionSplit split;
  const int64_t max_keys = in.max_keys > 1 ? in.max_keys : 1;
  split.partition_size = max_keys;
  const int64_t base = in.base_blocks > 1 ? in.base_blocks : 1;
  const int64_t target = int64_t{kSplitBlocksPerSm} * (in.num_sms > 1 ? in.num_sms : 1);
  int64_t n = (target + base - 1) / base;
  const int64_t by_length = max_keys / kMinPartitionKeys;
  if (n > by_length) n = by_length;
  if (n > kMaxPartitions) n = kMaxPartitions;
  if (in.partial_bytes > 0 && n * in.partial_bytes > kMaxSplitWorkspaceBytes) {
    n = kMaxSplitWorkspaceBytes / in.partial_bytes;
  }
  if (n <= 1) return split;
  int64_t size = (max_keys + n - 1) / n;
  size = (size + 15) / 16 * 16;
  split.partition_size = size;
  split.num_partitions = static_cast<int32_t>((max_keys + size - 1) / size);
  return split;
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_ATTENTION_SPLIT_H_
