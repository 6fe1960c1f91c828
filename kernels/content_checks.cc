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

}  // namespace

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
      if (!BlockIdValid(table[b], a.cache.num_blocks)) {
        return Invalid(op, absl::StrCat("block_tables[", s, "][", b, "] = ", table[b],
                                        " is outside [0, ", a.cache.num_blocks, ")"));
      }
    }
  }
  return CheckPositions(op, "positions", a.positions, a.num_tokens);
}

absl::Status CheckSampleContents(const SampleArgs& args) {
  for (int64_t s = 0; s < args.num_seqs; ++s) {
    if (!SamplingParamsValid(args.params[s])) {
      return Invalid(
          "Sample", absl::StrCat("params[", s, "] needs a finite temperature and top_p in (0, 1]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
