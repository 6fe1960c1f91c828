// Copyright 2026 The pagedkv Authors.
//
// The 64-bit word in which a deferred content check (pagedkv::cuda::ContentCheck::kDeferred,
// pagedkv/kernels/cuda_ops.h) records the first bad entry of an op's index arrays: which op, which
// array, which index. Encoding and decoding are PAGEDKV_HD, so the CUDA check kernels and host code
// agree on them; BadEntryStatus turns a word read back from the device into the InvalidArgument a
// validated call would have returned (naming the entry, not its value, which the device did not
// keep). Plain functions: thread-safe.
//
// Word layout: bits 56-63 the op (CheckedOp, >= 1), bits 48-55 the array (CheckedArray, >= 1),
// bits 0-47 the index (clamped to kMaxBadEntryIndex). 0 (kNoBadEntry) means "nothing recorded".
// Within one op a smaller word is an earlier entry in that op's check order: arrays are numbered in
// the order the op checks them, then indices ascend. So a kernel that keeps the minimum word over
// its bad entries keeps the first one.
//
// Example:
//   uint64_t word = pagedkv::EncodeBadEntry(pagedkv::CheckedOp::kReshapeAndCache,
//                                           pagedkv::CheckedArray::kSlotMapping, 7);
//   absl::Status s = pagedkv::BadEntryStatus(word);  // "ReshapeAndCache: slot_mapping[7] ..."
#ifndef PAGEDKV_KERNELS_BAD_ENTRY_H_
#define PAGEDKV_KERNELS_BAD_ENTRY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/hd.h"

namespace pagedkv {

// Ops whose device index arrays are content-checked.
enum class CheckedOp : uint8_t {
  kRope = 1,
  kReshapeAndCache = 2,
  kReRotate = 3,
  kEmbeddingGather = 4,
  kPagedAttention = 5,
  kSample = 6,
};

// Index arrays, numbered in every op's check order (an op checks a lower number first).
enum class CheckedArray : uint8_t {
  kSlotMapping = 1,    // ReshapeAndCacheArgs::slot_mapping
  kSrcSlots = 2,       // ReRotateArgs::src_slots
  kDstSlots = 3,       // ReRotateArgs::dst_slots
  kOldPositions = 4,   // ReRotateArgs::old_positions
  kNewPositions = 5,   // ReRotateArgs::new_positions
  kQueryStartLoc = 6,  // PagedAttentionArgs::query_start_loc
  kKvLens = 7,         // PagedAttentionArgs::kv_lens
  kBlockTables = 8,    // PagedAttentionArgs::block_tables (flat index s * max_blocks_per_seq + b)
  kPositions = 9,      // positions of Rope, ReshapeAndCache and PagedAttention
  kTokenIds = 10,      // EmbeddingGatherArgs::token_ids
  kParams = 11,        // SampleArgs::params
};

inline constexpr uint64_t kNoBadEntry = 0;
inline constexpr int64_t kMaxBadEntryIndex = (int64_t{1} << 48) - 1;

// A decoded word.
struct PAGEDKV_EXPORT BadEntry {
  CheckedOp op = CheckedOp::kRope;
  CheckedArray array = CheckedArray::kPositions;
  int64_t index = 0;  // element of the array (clamped to kMaxBadEntryIndex)
};

// The word of entry `index` of `array` of `op`; never kNoBadEntry. Negative indices encode as 0.
PAGEDKV_HD uint64_t EncodeBadEntry(CheckedOp op, CheckedArray array, int64_t index) {
  const int64_t clamped = index < 0 ? 0 : (index > kMaxBadEntryIndex ? kMaxBadEntryIndex : index);
  return (static_cast<uint64_t>(op) << 56) | (static_cast<uint64_t>(array) << 48) |
         static_cast<uint64_t>(clamped);
}

// The fields of `word`. REQUIRES: word != kNoBadEntry (BadEntryStatus checks the fields).
PAGEDKV_HD BadEntry DecodeBadEntry(uint64_t word) {
  BadEntry entry;
  entry.op = static_cast<CheckedOp>(word >> 56);
  entry.array = static_cast<CheckedArray>((word >> 48) & 0xffu);
  entry.index = static_cast<int64_t>(word & static_cast<uint64_t>(kMaxBadEntryIndex));
  return entry;
}

// "ReshapeAndCache", "slot_mapping", ...; nullptr for a value outside the enum.
PAGEDKV_EXPORT const char* CheckedOpName(CheckedOp op);
PAGEDKV_EXPORT const char* CheckedArrayName(CheckedArray array);

// OK for kNoBadEntry. Otherwise InvalidArgument "<op>: <array>[<index>] is invalid (recorded by a
// deferred content check; ...)", or InvalidArgument saying the word is not a bad-entry word when
// its op or array is outside the enums (e.g. a flag the caller never cleared to 0).
PAGEDKV_EXPORT absl::Status BadEntryStatus(uint64_t word);

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_BAD_ENTRY_H_
