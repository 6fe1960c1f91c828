// Copyright 2026 The pagedkv Authors.
//
// Shape / config checks shared by the CPU and CUDA backends.
#include "kernels/op_validate.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

absl::Status Invalid(const char* op, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", std::string(what)));
}

absl::Status NeedPointer(const char* op, const void* p, const char* name) {
  if (p == nullptr) return Invalid(op, absl::StrCat(name, " is null"));
  return absl::OkStatus();
}

absl::Status NeedPositive(const char* op, int64_t value, const char* name) {
  if (value < 1) return Invalid(op, absl::StrCat(name, " = ", value, " must be >= 1"));
  return absl::OkStatus();
}

absl::Status NeedNonNegative(const char* op, int64_t value, const char* name) {
  if (value < 0) return Invalid(op, absl::StrCat(name, " = ", value, " must be >= 0"));
  return absl::OkStatus();
}

absl::Status NeedHeadDim(const char* op, int64_t head_dim) {
  if (head_dim < 2 || head_dim > kMaxHeadDim || head_dim % 2 != 0) {
    return Invalid(
        op, absl::StrCat("head_dim = ", head_dim, " is unsupported: use an even value in [2, ",
                         kMaxHeadDim, "]"));
  }
  return absl::OkStatus();
}

// A row stride of 0 means `min`; otherwise it must be >= min.
absl::Status NeedStride(const char* op, int64_t stride, int64_t min, const char* name) {
  if (stride != 0 && stride < min) {
    return Invalid(op, absl::StrCat(name, " = ", stride, " is smaller than a row (", min, ")"));
  }
  return NeedNonNegative(op, stride, name);
}

}  // namespace

absl::Status ValidateLayout(const char* op, const PagedKvLayout& cache) {
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, cache.k, "cache.k"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, cache.v, "cache.v"));
  if (!IsValidDType(cache.dtype)) return Invalid(op, "cache.dtype is not f32, f16 or bf16");
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, cache.num_blocks, "cache.num_blocks"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, cache.block_size, "cache.block_size"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, cache.num_kv_heads, "cache.num_kv_heads"));
  return NeedHeadDim(op, cache.head_dim);
}

absl::Status ValidateRopeView(const char* op, const RopeTableView& rope) {
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, rope.cos_sin, "rope.cos_sin"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, rope.inv_freq, "rope.inv_freq"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, rope.num_positions, "rope.num_positions"));
  PAGEDKV_RETURN_IF_ERROR(NeedHeadDim(op, rope.head_dim));
  if (rope.rotary_dim < 2 || rope.rotary_dim > rope.head_dim || rope.rotary_dim % 2 != 0) {
    return Invalid(
        op, absl::StrCat("rope.rotary_dim = ", rope.rotary_dim, " must be even in [2, head_dim]"));
  }
  if (rope.layout != RopeLayout::kInterleaved && rope.layout != RopeLayout::kHalfSplit) {
    return Invalid(op, "rope.layout is not a RopeLayout value");
  }
  return absl::OkStatus();
}

absl::Status ValidateLinear(const LinearArgs& args) {
  const char* op = "Linear";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.x, "x"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.w, "w"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.y, "y"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.m, "m"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.n, "n"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.k, "k"));
  if (args.y == args.x || args.y == args.w) return Invalid(op, "y must not alias x or w");
  return absl::OkStatus();
}

absl::Status ValidateEmbeddingGather(const EmbeddingGatherArgs& args) {
  const char* op = "EmbeddingGather";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.table, "table"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.token_ids, "token_ids"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.out, "out"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_tokens, "num_tokens"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.vocab_size, "vocab_size"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.dim, "dim"));
  return absl::OkStatus();
}

absl::Status ValidateRmsNorm(const RmsNormArgs& args) {
  const char* op = "RmsNorm";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.x, "x"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.weight, "weight"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.out, "out"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_rows, "num_rows"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.dim, "dim"));
  if (!(args.eps >= 0.0f)) return Invalid(op, "eps must be >= 0");
  return absl::OkStatus();
}

absl::Status ValidateSwiGlu(const SwiGluArgs& args) {
  const char* op = "SwiGlu";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.gate, "gate"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.up, "up"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.out, "out"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_rows, "num_rows"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.dim, "dim"));
  PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.gate_stride, args.dim, "gate_stride"));
  PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.up_stride, args.dim, "up_stride"));
  const bool strided = (args.gate_stride != 0 && args.gate_stride != args.dim) ||
                       (args.up_stride != 0 && args.up_stride != args.dim);
  if (strided && (args.out == args.gate || args.out == args.up)) {
    return Invalid(op, "out may alias gate or up only when both are contiguous");
  }
  return absl::OkStatus();
}

absl::Status ValidateLmHead(const LmHeadArgs& args) {
  const char* op = "LmHead";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.hidden, "hidden"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.weight, "weight"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.logits, "logits"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_rows, "num_rows"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.d_model, "d_model"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.vocab_size, "vocab_size"));
  return absl::OkStatus();
}

absl::Status ValidateRope(const RopeArgs& args) {
  const char* op = "Rope";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.q, "q"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.positions, "positions"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_tokens, "num_tokens"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.num_q_heads, "num_q_heads"));
  PAGEDKV_RETURN_IF_ERROR(ValidateRopeView(op, args.rope));
  const int64_t hd = args.rope.head_dim;
  PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.q_stride, args.num_q_heads * hd, "q_stride"));
  if (args.k != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.num_kv_heads, "num_kv_heads"));
    PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.k_stride, args.num_kv_heads * hd, "k_stride"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReshapeAndCache(const ReshapeAndCacheArgs& args) {
  const char* op = "ReshapeAndCache";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.k, "k"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.v, "v"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.slot_mapping, "slot_mapping"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_tokens, "num_tokens"));
  PAGEDKV_RETURN_IF_ERROR(ValidateLayout(op, args.cache));
  const int64_t hd = args.cache.head_dim;
  const int64_t kv_row = args.cache.TokenStride();
  PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.k_stride, kv_row, "k_stride"));
  PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.v_stride, kv_row, "v_stride"));
  if (args.q != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.num_q_heads, "num_q_heads"));
    PAGEDKV_RETURN_IF_ERROR(NeedStride(op, args.q_stride, args.num_q_heads * hd, "q_stride"));
  }
  if (args.rotate) {
    PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.positions, "positions"));
    PAGEDKV_RETURN_IF_ERROR(ValidateRopeView(op, args.rope));
    if (args.rope.head_dim != hd) {
      return Invalid(op, absl::StrCat("rope.head_dim = ", args.rope.head_dim,
                                      " differs from cache.head_dim = ", hd));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateReRotate(const ReRotateArgs& args) {
  const char* op = "ReRotate";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.src_slots, "src_slots"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.dst_slots, "dst_slots"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.old_positions, "old_positions"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.new_positions, "new_positions"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_tokens, "num_tokens"));
  if (args.mode != ReRotateMode::kCompose && args.mode != ReRotateMode::kDelta) {
    return Invalid(op, "mode is not a ReRotateMode value");
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateLayout(op, args.cache));
  PAGEDKV_RETURN_IF_ERROR(ValidateRopeView(op, args.rope));
  if (args.rope.head_dim != args.cache.head_dim) {
    return Invalid(op, absl::StrCat("rope.head_dim = ", args.rope.head_dim,
                                    " differs from cache.head_dim = ", args.cache.head_dim));
  }
  return absl::OkStatus();
}

absl::Status ValidatePagedAttention(const PagedAttentionArgs& args) {
  const char* op = "PagedAttention";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.q, "q"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.out, "out"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.positions, "positions"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.query_start_loc, "query_start_loc"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.kv_lens, "kv_lens"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.block_tables, "block_tables"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_tokens, "num_tokens"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_seqs, "num_seqs"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.num_q_heads, "num_q_heads"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.max_blocks_per_seq, "max_blocks_per_seq"));
  PAGEDKV_RETURN_IF_ERROR(ValidateLayout(op, args.cache));
  if (args.num_q_heads % args.cache.num_kv_heads != 0) {
    return Invalid(
        op, absl::StrCat("num_q_heads = ", args.num_q_heads,
                         " is not a multiple of cache.num_kv_heads = ", args.cache.num_kv_heads));
  }
  if (!(args.scale >= 0.0f)) return Invalid(op, "scale must be >= 0 (0: 1/sqrt(head_dim))");
  return absl::OkStatus();
}

absl::Status ValidateSample(const SampleArgs& args) {
  const char* op = "Sample";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.logits, "logits"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.params, "params"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.out_tokens, "out_tokens"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.num_seqs, "num_seqs"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.vocab_size, "vocab_size"));
  if (args.vocab_size > INT32_MAX) return Invalid(op, "vocab_size must fit int32");
  return absl::OkStatus();
}

}  // namespace pagedkv
