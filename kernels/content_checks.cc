// Copyright 2026 The pagedkv Authors.
//
// Host content checks over the PAGEDKV_HD predicates of kernels/content_checks.h.
#include "kernels/content_checks.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

absl::Status Invalid(const char* op, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

absl::Status CheckPositions(const char* op, const char* name, const int32_t* positions, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    if (!PositionValid(positions[t])) {
      return Invalid(op, absl::StrCat(name, "[", t, "] = ", positions[t], " must be >= 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSlots(const char* op, const char* name, const int64_t* slots, int64_t n,
                        int64_t num_slots, bool allow_skip) {
  for (int64_t t = 0; t < n; ++t) {
    if (!SlotValid(slots[t], num_slots, allow_skip)) {
      return Invalid(op, absl::StrCat(name, "[", t, "] = ", slots[t], " is outside [0, ", num_slots,
                                      ")", allow_skip ? " (or -1 to skip)" : ""));
    }
  }
  return absl::OkStatus();
}

// Smallest word of a bad entry in positions[0, n), or kNoBadEntry.
uint64_t FirstBadPosition(CheckedOp op, CheckedArray array, const int32_t* positions, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    if (!PositionValid(positions[t])) return EncodeBadEntry(op, array, t);
  }
  return kNoBadEntry;
}

uint64_t FirstBadSlot(CheckedOp op, CheckedArray array, const int64_t* slots, int64_t n,
                      int64_t num_slots, bool allow_skip) {
  for (int64_t t = 0; t < n; ++t) {
    if (!SlotValid(slots[t], num_slots, allow_skip)) return EncodeBadEntry(op, array, t);
  }
  return kNoBadEntry;
}

// The smaller of two words, kNoBadEntry counting as "none".
uint64_t Earlier(uint64_t a, uint64_t b) {
  if (a == kNoBadEntry) return b;
  if (b == kNoBadEntry) return a;
  return a < b ? a : b;
}

}  // namespace

const char* CheckedOpName(CheckedOp op) {
  switch (op) {
    case CheckedOp::kRope:
      return "Rope";
    case CheckedOp::kReshapeAndCache:
      return "ReshapeAndCache";
    case CheckedOp::kReRotate:
      return "ReRotate";
    case CheckedOp::kEmbeddingGather:
      return "EmbeddingGather";
    case CheckedOp::kPagedAttention:
      return "PagedAttention";
    case CheckedOp::kSample:
      return "Sample";
  }
  return nullptr;
}

const char* CheckedArrayName(CheckedArray array) {
  switch (array) {
    case CheckedArray::kSlotMapping:
      return "slot_mapping";
    case CheckedArray::kSrcSlots:
      return "src_slots";
    case CheckedArray::kDstSlots:
      return "dst_slots";
    case CheckedArray::kOldPositions:
      return "old_positions";
    case CheckedArray::kNewPositions:
      return "new_positions";
    case CheckedArray::kQueryStartLoc:
      return "query_start_loc";
    case CheckedArray::kKvLens:
      return "kv_lens";
    case CheckedArray::kBlockTables:
      return "block_tables";
    case CheckedArray::kPositions:
      return "positions";
    case CheckedArray::kTokenIds:
      return "token_ids";
    case CheckedArray::kParams:
      return "params";
  }
  return nullptr;
}

absl::Status BadEntryStatus(uint64_t word) {
  if (word == kNoBadEntry) return absl::OkStatus();
  const BadEntry entry = DecodeBadEntry(word);
  const char* op = CheckedOpName(entry.op);
  const char* array = CheckedArrayName(entry.array);
  if (op == nullptr || array == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("deferred content check: word 0x", absl::Hex(word),
                     " is not a bad-entry word; clear the flag to 0 before the first launch"));
  }
  return Invalid(op, absl::StrCat(array, "[", entry.index,
                                  "] is invalid (recorded by a deferred content check; the op "
                                  "skipped it: check that array and rerun the step)"));
}

absl::Status CheckRopeContents(const RopeArgs& args) {
  return CheckPositions("Rope", "positions", args.positions, args.num_tokens);
}

absl::Status CheckReshapeAndCacheContents(const ReshapeAndCacheArgs& args) {
  const char* op = "ReshapeAndCache";
  PAGEDKV_RETURN_IF_ERROR(CheckSlots(op, "slot_mapping", args.slot_mapping, args.num_tokens,
                                     args.cache.NumSlots(), /*allow_skip=*/true));
  if (args.rotate) {
    PAGEDKV_RETURN_IF_ERROR(CheckPositions(op, "positions", args.positions, args.num_tokens));
  }
  return absl::OkStatus();
}

absl::Status CheckReRotateContents(const ReRotateArgs& args) {
  const char* op = "ReRotate";
  const int64_t num_slots = args.cache.NumSlots();
  PAGEDKV_RETURN_IF_ERROR(
      CheckSlots(op, "src_slots", args.src_slots, args.num_tokens, num_slots, false));
  PAGEDKV_RETURN_IF_ERROR(
      CheckSlots(op, "dst_slots", args.dst_slots, args.num_tokens, num_slots, false));
  PAGEDKV_RETURN_IF_ERROR(CheckPositions(op, "old_positions", args.old_positions, args.num_tokens));
  return CheckPositions(op, "new_positions", args.new_positions, args.num_tokens);
}

absl::Status CheckEmbeddingGatherContents(const EmbeddingGatherArgs& args) {
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    if (!TokenIdValid(args.token_ids[t], args.vocab_size)) {
      return Invalid("EmbeddingGather", absl::StrCat("token_ids[", t, "] = ", args.token_ids[t],
                                                     " is outside [0, ", args.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckPagedAttentionContents(const PagedAttentionArgs& a) {
  const char* op = "PagedAttention";
  if (a.query_start_loc[0] != 0) return Invalid(op, "query_start_loc[0] must be 0");
  if (a.query_start_loc[a.num_seqs] != a.num_tokens) {
    return Invalid(op, absl::StrCat("query_start_loc[num_seqs] = ", a.query_start_loc[a.num_seqs],
                                    " must equal num_tokens = ", a.num_tokens));
  }
  const int64_t capacity = int64_t{a.max_blocks_per_seq} * a.cache.block_size;
  for (int32_t s = 0; s < a.num_seqs; ++s) {
    if (a.query_start_loc[s + 1] < a.query_start_loc[s]) {
      return Invalid(op, absl::StrCat("query_start_loc is decreasing at sequence ", s));
    }
    const int32_t kv_len = a.kv_lens[s];
    if (!KvLenValid(kv_len, capacity)) {
      return Invalid(op, absl::StrCat("kv_lens[", s, "] = ", kv_len, " is outside [1, ", capacity,
                                      "] (max_blocks_per_seq * block_size)"));
    }
    const int32_t* table = a.block_tables + int64_t{s} * a.max_blocks_per_seq;
    const int64_t used = UsedBlocks(kv_len, a.cache.block_size);
    for (int64_t b = 0; b < used; ++b) {
      if (!AttentionTableEntryValid(a, s, b)) {
        return Invalid(
            op, absl::StrCat("block_tables[", s, "][", b, "] = ", table[b], " is outside [0, ",
                             a.cache.num_blocks, ") (-1 only before a sliding window)"));
      }
    }
  }
  return CheckPositions(op, "positions", a.positions, a.num_tokens);
}

absl::Status CheckSampleContents(const SampleArgs& args) {
  for (int64_t s = 0; s < args.num_seqs; ++s) {
    if (!SamplingParamsValid(args.params[s])) {
      return Invalid("Sample",
                     absl::StrCat("params[", s,
                                  "] needs a finite temperature, top_p in (0, 1], top_k >= 0 and "
                                  "min_p in [0, 1]"));
    }
  }
  return absl::OkStatus();
}

uint64_t FirstBadEntry(const RopeArgs& args) {
  return FirstBadPosition(CheckedOp::kRope, CheckedArray::kPositions, args.positions,
                          args.num_tokens);
}

uint64_t FirstBadEntry(const ReshapeAndCacheArgs& args) {
  const CheckedOp op = CheckedOp::kReshapeAndCache;
  uint64_t word = FirstBadSlot(op, CheckedArray::kSlotMapping, args.slot_mapping, args.num_tokens,
                               args.cache.NumSlots(), /*allow_skip=*/true);
  if (args.rotate) {
    word = Earlier(word,
                   FirstBadPosition(op, CheckedArray::kPositions, args.positions, args.num_tokens));
  }
  return word;
}

uint64_t FirstBadEntry(const ReRotateArgs& args) {
  const CheckedOp op = CheckedOp::kReRotate;
  const int64_t n = args.num_tokens;
  const int64_t num_slots = args.cache.NumSlots();
  uint64_t word = FirstBadSlot(op, CheckedArray::kSrcSlots, args.src_slots, n, num_slots, false);
  word =
      Earlier(word, FirstBadSlot(op, CheckedArray::kDstSlots, args.dst_slots, n, num_slots, false));
  word = Earlier(word, FirstBadPosition(op, CheckedArray::kOldPositions, args.old_positions, n));
  return Earlier(word, FirstBadPosition(op, CheckedArray::kNewPositions, args.new_positions, n));
}

uint64_t FirstBadEntry(const EmbeddingGatherArgs& args) {
  for (int64_t t = 0; t < args.num_tokens; ++t) {
    if (!TokenIdValid(args.token_ids[t], args.vocab_size)) {
      return EncodeBadEntry(CheckedOp::kEmbeddingGather, CheckedArray::kTokenIds, t);
    }
  }
  return kNoBadEntry;
}

uint64_t FirstBadEntry(const PagedAttentionArgs& a) {
  const CheckedOp op = CheckedOp::kPagedAttention;
  uint64_t word = kNoBadEntry;
  const auto mark = [&](CheckedArray array, int64_t index) {
    word = Earlier(word, EncodeBadEntry(op, array, index));
  };
  if (a.query_start_loc[0] != 0) mark(CheckedArray::kQueryStartLoc, 0);
  if (a.query_start_loc[a.num_seqs] != a.num_tokens) {
    mark(CheckedArray::kQueryStartLoc, a.num_seqs);
  }
  const int64_t capacity = int64_t{a.max_blocks_per_seq} * a.cache.block_size;
  for (int32_t s = 0; s < a.num_seqs; ++s) {
    if (a.query_start_loc[s + 1] < a.query_start_loc[s]) mark(CheckedArray::kQueryStartLoc, s + 1);
    const int32_t kv_len = a.kv_lens[s];
    if (!KvLenValid(kv_len, capacity)) {
      mark(CheckedArray::kKvLens, s);
      continue;
    }
    const int64_t row = int64_t{s} * a.max_blocks_per_seq;
    for (int64_t b = 0; b < UsedBlocks(kv_len, a.cache.block_size); ++b) {
      if (!AttentionTableEntryValid(a, s, b)) {
        mark(CheckedArray::kBlockTables, row + b);
      }
    }
  }
  return Earlier(word, FirstBadPosition(op, CheckedArray::kPositions, a.positions, a.num_tokens));
}

uint64_t FirstBadEntry(const SampleArgs& args) {
  for (int64_t s = 0; s < args.num_seqs; ++s) {
    if (!SamplingParamsValid(args.params[s])) {
      return EncodeBadEntry(CheckedOp::kSample, CheckedArray::kParams, s);
    }
  }
  return kNoBadEntry;
}

}  // namespace pagedkv
