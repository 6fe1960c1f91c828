// Copyright 2026 The pagedkv Authors.
//
// Shape / config checks shared by the CPU and CUDA backends.
#include "kernels/op_validate.h"

#include <cstdint>
#include <string>
#include <utility>

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

// Layout strides. Every span stays below kMaxSpanElements, so offset arithmetic (in elements and
// in bytes) never overflows int64.
constexpr int64_t kMaxSpanElements = int64_t{1} << 56;

// a * b <= kMaxSpanElements, for a, b >= 0.
bool ProductFits(int64_t a, int64_t b) { return b == 0 || a <= kMaxSpanElements / b; }

// One strided dimension of a page pool (the innermost, head_dim with stride 1, is implicit).
struct StridedDim {
  int64_t stride = 0;
  int64_t count = 0;
  const char* field = "";  // the PagedKvLayout field that sets stride
  const char* what = "";   // what overlaps when the stride is too small
};

// Stride fields are >= 0 and every effective stride and span stays below kMaxSpanElements.
absl::Status NeedStridesInRange(const char* op, const PagedKvLayout& c) {
  const std::pair<int64_t, const char*> fields[] = {{c.head_stride, "cache.head_stride"},
                                                    {c.token_stride, "cache.token_stride"},
                                                    {c.block_stride, "cache.block_stride"}};
  for (const auto& [value, name] : fields) {
    if (value < 0) {
      return Invalid(op, absl::StrCat(name, " = ", value, " must be >= 0 (0: contiguous)"));
    }
  }
  const bool fits =
      c.HeadStride() <= kMaxSpanElements && ProductFits(c.HeadStride(), c.num_kv_heads) &&
      c.TokenStride() <= kMaxSpanElements && ProductFits(c.TokenStride(), c.block_size) &&
      c.PageElements() <= kMaxSpanElements && c.BlockStride() <= kMaxSpanElements &&
      ProductFits(c.BlockStride(), c.num_blocks) && c.SpanElements() <= kMaxSpanElements;
  if (!fits) {
    return Invalid(op, absl::StrCat("cache strides span more than 2^56 elements; use strides that "
                                    "fit the pool's allocation"));
  }
  return absl::OkStatus();
}

// The dims with more than one index, finest (smallest stride) first; no allocation (validation
// runs on every call).
struct SortedDims {
  explicit SortedDims(const PagedKvLayout& c) {
    const StridedDim all[] = {{c.HeadStride(), c.num_kv_heads, "cache.head_stride", "heads"},
                              {c.TokenStride(), c.block_size, "cache.token_stride", "tokens"},
                              {c.BlockStride(), c.num_blocks, "cache.block_stride", "blocks"}};
    for (const StridedDim& d : all) {
      if (d.count < 2) continue;
      size_t i = n++;
      for (; i > 0 && dims[i - 1].stride > d.stride; --i) dims[i] = dims[i - 1];  // stable
      dims[i] = d;
    }
  }
  size_t size() const { return n; }
  const StridedDim& operator[](size_t i) const { return dims[i]; }
  StridedDim dims[3];
  size_t n = 0;
};

// Elements from the first to one past the last offset of dims[0, level) over a head_dim run.
int64_t Extent(const SortedDims& dims, size_t level, int64_t head_dim) {
  int64_t extent = head_dim;
  for (size_t i = 0; i < level; ++i) extent += (dims[i].count - 1) * dims[i].stride;
  return extent;
}

// True when the offset set O of dims[0, level) and x + O share no element. REQUIRES: the dims are
// nested (each stride >= the extent of the finer ones), so at most two shifts of each level can
// land within the finer extent and need a closer look.
bool ShiftDisjoint(const SortedDims& dims, size_t level, int64_t head_dim, int64_t x) {
  if (x < 0) x = -x;
  if (level == 0) return x >= head_dim;
  const StridedDim& d = dims[level - 1];
  const int64_t inner = Extent(dims, level - 1, head_dim);
  const int64_t q = x / d.stride;
  for (const int64_t m : {-q, -q - 1}) {
    if (m < -(d.count - 1)) continue;
    const int64_t y = x + m * d.stride;
    if ((y < 0 ? -y : y) < inner && !ShiftDisjoint(dims, level - 1, head_dim, y)) return false;
  }
  return true;
}

// Strides are nested, so no two elements of K (or of V) share an address.
absl::Status NeedNestedStrides(const char* op, const PagedKvLayout& c) {
  const SortedDims dims(c);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t extent = Extent(dims, i, c.RowUnits());
    if (dims[i].stride < extent) {
      return Invalid(op, absl::StrCat(dims[i].field, " = ", dims[i].stride, " makes ", dims[i].what,
                                      " overlap: it must be >= ", extent,
                                      " (the extent of the finer dimensions)"));
    }
  }
  return absl::OkStatus();
}

// Strides are nested, and K and V (one dtype, the same strides) share no element.
absl::Status NeedDisjointElements(const char* op, const PagedKvLayout& c) {
  PAGEDKV_RETURN_IF_ERROR(NeedNestedStrides(op, c));
  const SortedDims dims(c);
  const int64_t esize = DTypeSize(c.dtype);
  const auto k = reinterpret_cast<uintptr_t>(c.k);
  const auto v = reinterpret_cast<uintptr_t>(c.v);
  const uint64_t distance = k > v ? k - v : v - k;
  const uint64_t span_bytes = static_cast<uint64_t>(c.SpanElements()) * esize;
  if (distance >= span_bytes) return absl::OkStatus();  // separate tensors
  if (distance % esize != 0) {
    return Invalid(op, absl::StrCat("cache.v - cache.k = ", distance,
                                    " bytes is not a multiple of the element size while their "
                                    "spans overlap; place v whole elements after k"));
  }
  const int64_t x = static_cast<int64_t>(distance) / esize;
  if (!ShiftDisjoint(dims, dims.size(), c.RowUnits(), x)) {
    return Invalid(op, absl::StrCat("cache.k and cache.v overlap: v - k = ", x,
                                    " elements puts a V element on a K element with these "
                                    "strides (a joint tensor puts V one page after K)"));
  }
  return absl::OkStatus();
}

// head_dim is a whole number of `dtype`'s row blocks; `field` names the dtype's field.
absl::Status NeedRowFits(const char* op, DType dtype, int32_t head_dim, const char* field) {
  if (head_dim % KvRowValuesMultiple(dtype) == 0) return absl::OkStatus();
  return Invalid(op, absl::StrCat(field, " ", DTypeName(dtype), " stores blocks of ",
                                  KvRowValuesMultiple(dtype), " values: head_dim = ", head_dim,
                                  " is not a multiple; use another KV dtype"));
}

// Mixed K and V dtypes: each side's strides nest, and K's and V's byte spans do not meet
// (separate tensors; a joint tensor needs one dtype).
absl::Status NeedMixedSidesApart(const char* op, const PagedKvLayout& cache) {
  if (cache.v_dtype != kVDTypeOfK && !IsValidDType(cache.v_dtype)) {
    return Invalid(op, "cache.v_dtype is neither a DType value nor kVDTypeOfK");
  }
  if (!cache.MixedDTypes()) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(NeedRowFits(op, cache.VDType(), cache.head_dim, "cache.v_dtype"));
  const PagedKvLayout k_side = cache.KSide();
  const PagedKvLayout v_side = cache.VSide();
  for (const PagedKvLayout* side : {&k_side, &v_side}) {
    PAGEDKV_RETURN_IF_ERROR(NeedStridesInRange(op, *side));
    PAGEDKV_RETURN_IF_ERROR(NeedNestedStrides(op, *side));
  }
  const auto k = reinterpret_cast<uintptr_t>(cache.k);
  const auto v = reinterpret_cast<uintptr_t>(cache.v);
  const bool apart = k < v ? v - k >= static_cast<uint64_t>(k_side.NumBytes())
                           : k - v >= static_cast<uint64_t>(v_side.NumBytes());
  if (apart) return absl::OkStatus();
  return Invalid(op, absl::StrCat("cache.k and cache.v overlap; with K in ", DTypeName(cache.dtype),
                                  " and V in ", DTypeName(cache.VDType()),
                                  " they must be separate tensors (SeparateKvLayout)"));
}

}  // namespace

absl::Status ValidateLayout(const char* op, const PagedKvLayout& cache) {
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, cache.k, "cache.k"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, cache.v, "cache.v"));
  if (!IsValidDType(cache.dtype)) return Invalid(op, "cache.dtype is not a DType value");
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, cache.num_blocks, "cache.num_blocks"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, cache.block_size, "cache.block_size"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, cache.num_kv_heads, "cache.num_kv_heads"));
  PAGEDKV_RETURN_IF_ERROR(NeedHeadDim(op, cache.head_dim));
  PAGEDKV_RETURN_IF_ERROR(NeedRowFits(op, cache.dtype, cache.head_dim, "cache.dtype"));
  if (cache.v_dtype != kVDTypeOfK && cache.v_dtype != cache.dtype) {
    return NeedMixedSidesApart(op, cache);
  }
  PAGEDKV_RETURN_IF_ERROR(NeedStridesInRange(op, cache));
  return NeedDisjointElements(op, cache);
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

absl::Status ValidateQuantLinear(const QuantLinearArgs& args) {
  const char* op = "QuantLinear";
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.x, "x"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.w, "w"));
  PAGEDKV_RETURN_IF_ERROR(NeedPointer(op, args.y, "y"));
  PAGEDKV_RETURN_IF_ERROR(NeedNonNegative(op, args.m, "m"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.n, "n"));
  PAGEDKV_RETURN_IF_ERROR(NeedPositive(op, args.k, "k"));
  const int type = static_cast<int>(args.w_type);
  if (args.w_type == WeightType::kF32 || type < 0 || type >= kWeightTypeCount) {
    return Invalid(op, absl::StrCat("w_type ", type,
                                    " must be a quantized or half type (use Linear for fp32 "
                                    "weights)"));
  }
  if (args.k % QuantBlockValuesOf(args.w_type) != 0) {
    return Invalid(op, absl::StrCat("k = ", args.k, " must be a multiple of the block size ",
                                    QuantBlockValuesOf(args.w_type), " of w_type ", type));
  }
  const int activations = static_cast<int>(args.activations);
  if (activations != static_cast<int>(ActivationType::kF32) &&
      activations != static_cast<int>(ActivationType::kInt8)) {
    return Invalid(op, absl::StrCat("activations ", activations, " must be kF32 (0) or kInt8 (1)"));
  }
  if (static_cast<const void*>(args.y) == args.x || static_cast<const void*>(args.y) == args.w) {
    return Invalid(op, "y must not alias x or w");
  }
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
  const int64_t kv_row = int64_t{args.cache.num_kv_heads} * hd;  // input rows are contiguous
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
  if (args.sliding_window < 0) {
    return Invalid(op, absl::StrCat("sliding_window must be >= 0 (0: full attention), got ",
                                    args.sliding_window));
  }
  if (args.sliding_window > 0 && !args.causal) {
    return Invalid(op, "sliding_window needs causal = true (the window is a causal mask)");
  }
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
