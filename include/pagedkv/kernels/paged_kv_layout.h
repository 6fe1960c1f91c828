// Copyright 2026 The pagedkv Authors.
//
// PagedKvLayout: one layer's K and V page pools as two base pointers plus element strides, and the
// offset arithmetic shared by the CPU reference and the CUDA kernels. Element (block, token of the
// block, head, d) of K is at
//   k + block * BlockStride() + token * TokenStride() + head * HeadStride() + d
// (in storage units of `dtype`, pagedkv/dtype.h: elements of the plain types; the dim stride is
// always 1), and the same offset from `v` for V. A quantized dtype stores each (token, head) row as
// RowUnits() bytes with its scales, reached at the offset of d = 0 (pagedkv/kernels/kv_quant.h
// loads and stores whole rows). There
// is no K-to-V stride field: K-to-V is the distance between the `k` and `v` pointers, so separate
// tensors and one joint tensor (V one page after K inside each block) are both two pointers.
//   slot = block_id * block_size + offset_in_block
// A stride of 0 means "contiguous": head_stride 0 is RowUnits(), token_stride 0 is num_kv_heads *
// HeadStride(), block_stride 0 is PageElements() (the tightest page). So an aggregate with no
// strides, as every caller wrote before strides existed, is today's separate K and V tensors
// [num_blocks, block_size, num_kv_heads, head_dim]. The helpers below build the other layouts:
//   SeparateKvLayout(k, v, shape, kNHD)  k, v: [num_blocks, block_size, num_kv_heads, head_dim]
//   SeparateKvLayout(k, v, shape, kHND)  k, v: [num_blocks, num_kv_heads, block_size, head_dim]
//   JointKvLayout(kv, shape, kNHD)       kv: [num_blocks, 2, block_size, num_kv_heads, head_dim]
//                                        (vLLM's FlashInfer backend, FlashInfer NHD)
//   JointKvLayout(kv, shape, kHND)       kv: [num_blocks, 2, num_kv_heads, block_size, head_dim]
//                                        (FlashInfer HND)
// Padding (a block or head stride larger than the tightest one) is set on the result's fields.
// Ops validate the strides (kernels/op_validate.h: not negative, no two elements of K or V at the
// same address) and touch only the layout's elements, never the padding between them.
// K and V may have different dtypes (llama.cpp's -ctk / -ctv): v_dtype names V's, and V then has
// strides of its own (v_head_stride, v_token_stride, v_block_stride, 0 meaning contiguous in V's
// storage units); with mixed dtypes K and V must be separate tensors. KSide() and VSide() give each
// as a layout of one dtype, so kernels address V as `VSide()` with the offsets of that view.
// Offsets are 64-bit. The struct does not own memory; host memory for pagedkv::cpu ops, device
// memory for pagedkv::cuda ops. Plain value type: thread-compatible.
//
// Example:
//   pagedkv::PagedKvShape shape{.dtype = pagedkv::DType::kBF16, .num_blocks = 1024,
//                               .block_size = 16, .num_kv_heads = 8, .head_dim = 128};
//   pagedkv::PagedKvLayout cache = pagedkv::JointKvLayout(kv_tensor, shape);  // vLLM
//   int64_t offset = cache.PositionOffset(block_table, /*position=*/37) + 3 * cache.HeadStride();
//   float k0 = pagedkv::LoadElement(cache.k, cache.dtype, offset);  // head 3, dim 0 of K
#ifndef PAGEDKV_KERNELS_PAGED_KV_LAYOUT_H_
#define PAGEDKV_KERNELS_PAGED_KV_LAYOUT_H_

#include <cstdint>

#include "pagedkv/dtype.h"
#include "pagedkv/export.h"
#include "pagedkv/hd.h"

namespace pagedkv {

// PagedKvLayout::v_dtype's default: V is stored as K is.
inline constexpr DType kVDTypeOfK = static_cast<DType>(-1);

struct PAGEDKV_EXPORT PagedKvLayout {
  void* k = nullptr;          // key pages (see the banner for the element offsets)
  void* v = nullptr;          // value pages, same strides; K-to-V is v - k
  DType dtype = DType::kF32;  // storage type of k (and of v unless v_dtype says otherwise)
  int32_t num_blocks = 0;     // physical blocks in the pool
  int32_t block_size = 0;     // tokens per block
  int32_t num_kv_heads = 0;   // KV heads per token
  int32_t head_dim = 0;       // values per head (stride 1)
  int64_t block_stride = 0;   // elements between blocks (0: PageElements())
  int64_t token_stride = 0;   // elements between tokens of a block (0: num_kv_heads * HeadStride())
  int64_t head_stride = 0;    // elements between heads of a token (0: RowUnits())
  DType v_dtype = kVDTypeOfK;  // V's storage type when it differs from K's (kVDTypeOfK: dtype)
  int64_t v_block_stride = 0;  // V's strides in V's units, read only when VDType() != dtype
  int64_t v_token_stride = 0;  // (0: contiguous, as for K)
  int64_t v_head_stride = 0;

  // V's storage type.
  PAGEDKV_HD DType VDType() const { return v_dtype == kVDTypeOfK ? dtype : v_dtype; }
  // True when K and V are stored in different dtypes.
  PAGEDKV_HD bool MixedDTypes() const { return VDType() != dtype; }
  // K alone as a layout of one dtype: k and v both point at K's pages.
  PAGEDKV_HD PagedKvLayout KSide() const {
    PagedKvLayout out = *this;
    out.v = k;
    out.v_dtype = kVDTypeOfK;
    out.v_block_stride = out.v_token_stride = out.v_head_stride = 0;
    return out;
  }
  // V alone as a layout of one dtype (V's strides): k and v both point at V's pages.
  PAGEDKV_HD PagedKvLayout VSide() const {
    PagedKvLayout out = *this;
    out.k = v;
    out.dtype = VDType();
    if (MixedDTypes()) {
      out.block_stride = v_block_stride;
      out.token_stride = v_token_stride;
      out.head_stride = v_head_stride;
    }
    out.v_dtype = kVDTypeOfK;
    out.v_block_stride = out.v_token_stride = out.v_head_stride = 0;
    return out;
  }

  // Storage units of one (token, head) row: head_dim, or a quantized row's bytes with its scales.
  PAGEDKV_HD int64_t RowUnits() const { return KvRowUnits(dtype, head_dim); }
  // Effective strides (0 fields resolved to the contiguous value).
  PAGEDKV_HD int64_t HeadStride() const { return head_stride != 0 ? head_stride : RowUnits(); }
  PAGEDKV_HD int64_t TokenStride() const {
    return token_stride != 0 ? token_stride : num_kv_heads * HeadStride();
  }
  PAGEDKV_HD int64_t BlockStride() const {
    return block_stride != 0 ? block_stride : PageElements();
  }
  // Elements from the first to one past the last element of one block's page (padding after the
  // last head or token excluded).
  PAGEDKV_HD int64_t PageElements() const {
    return (block_size - 1) * TokenStride() + (num_kv_heads - 1) * HeadStride() + RowUnits();
  }
  // Copy with every stride field explicit, V's too when mixed (what the ops run on; offsets are
  // unchanged).
  PAGEDKV_HD PagedKvLayout Resolved() const {
    PagedKvLayout out = *this;
    out.head_stride = HeadStride();
    out.token_stride = TokenStride();
    out.block_stride = BlockStride();
    if (MixedDTypes()) {
      const PagedKvLayout v_side = VSide();
      out.v_head_stride = v_side.HeadStride();
      out.v_token_stride = v_side.TokenStride();
      out.v_block_stride = v_side.BlockStride();
    }
    return out;
  }
  // True when every stride is the contiguous one ([num_blocks, block_size, heads, head_dim]).
  PAGEDKV_HD bool IsContiguous() const {
    return HeadStride() == RowUnits() && TokenStride() == num_kv_heads * RowUnits() &&
           BlockStride() == block_size * num_kv_heads * RowUnits();
  }
  // Number of slots (valid slots are [0, NumSlots())).
  PAGEDKV_HD int64_t NumSlots() const { return static_cast<int64_t>(num_blocks) * block_size; }
  // Storage units of the layout in each of k and v (what an op may read or write through each).
  PAGEDKV_HD int64_t NumElements() const { return NumSlots() * num_kv_heads * RowUnits(); }
  // Elements from k (or v) to one past its last element: the memory an op may touch through each
  // pointer, padding between elements included. Equals NumElements() when IsContiguous(). For a
  // joint tensor the spans of k and v overlap (their pages interleave); the tensor itself is
  // (v - k) + SpanElements() elements.
  PAGEDKV_HD int64_t SpanElements() const {
    return (num_blocks - int64_t{1}) * BlockStride() + PageElements();
  }
  // SpanElements() in bytes (K's; VSide().NumBytes() is V's).
  PAGEDKV_HD int64_t NumBytes() const { return SpanElements() * DTypeSize(dtype); }
  // Slot of token `offset` in block `block_id`.
  PAGEDKV_HD int64_t Slot(int32_t block_id, int32_t offset) const {
    return static_cast<int64_t>(block_id) * block_size + offset;
  }
  // Slot holding logical position `position` of a sequence with block table `block_table`.
  // REQUIRES: block_table has at least position / block_size + 1 entries.
  PAGEDKV_HD int64_t SlotForPosition(const int32_t* block_table, int64_t position) const {
    return Slot(block_table[position / block_size], static_cast<int32_t>(position % block_size));
  }
  // Element offset of (block, token of the block, head 0, d 0).
  PAGEDKV_HD int64_t TokenOffset(int64_t block_id, int64_t offset) const {
    return block_id * BlockStride() + offset * TokenStride();
  }
  // Element offset of (slot, head 0, d 0).
  PAGEDKV_HD int64_t SlotOffset(int64_t slot) const {
    return TokenOffset(slot / block_size, slot % block_size);
  }
  // Element offset of (logical position, head 0, d 0) of a sequence with `block_table`.
  // REQUIRES: as SlotForPosition.
  PAGEDKV_HD int64_t PositionOffset(const int32_t* block_table, int64_t position) const {
    return TokenOffset(block_table[position / block_size], position % block_size);
  }
  // Element offset of (slot, head, d) in k or v. REQUIRES: a plain (not quantized) dtype.
  PAGEDKV_HD int64_t ElementOffset(int64_t slot, int32_t head, int32_t d) const {
    return SlotOffset(slot) + head * HeadStride() + d;
  }
};

// Order of a block's page (FlashInfer's QKVLayout names).
enum class KvPageOrder : int32_t {
  kNHD = 0,  // page [block_size, num_kv_heads, head_dim]: tokens outer
  kHND = 1,  // page [num_kv_heads, block_size, head_dim]: heads outer
};

// The logical shape of one layer's pool, for the layout helpers.
struct PAGEDKV_EXPORT PagedKvShape {
  DType dtype = DType::kF32;   // storage type (K's, and V's unless v_dtype says otherwise)
  DType v_dtype = kVDTypeOfK;  // V's storage type (SeparateKvLayout only)
  int32_t num_blocks = 0;      // physical blocks
  int32_t block_size = 0;      // tokens per block
  int32_t num_kv_heads = 0;    // KV heads per token
  int32_t head_dim = 0;        // elements per head
};

// Strides of one tight page in `order`; k and v as given.
PAGEDKV_HD PagedKvLayout PageLayout(void* k, void* v, const PagedKvShape& shape, KvPageOrder order,
                                    int64_t block_stride) {
  PagedKvLayout out{.k = k,
                    .v = v,
                    .dtype = shape.dtype,
                    .num_blocks = shape.num_blocks,
                    .block_size = shape.block_size,
                    .num_kv_heads = shape.num_kv_heads,
                    .head_dim = shape.head_dim};
  const int64_t hd = KvRowUnits(shape.dtype, shape.head_dim);
  out.head_stride = order == KvPageOrder::kNHD ? hd : hd * shape.block_size;
  out.token_stride = order == KvPageOrder::kNHD ? hd * shape.num_kv_heads : hd;
  out.block_stride = block_stride;
  return out;
}

// Storage units of one tight page of `shape` (either order).
PAGEDKV_HD int64_t PageElementsOf(const PagedKvShape& shape) {
  return int64_t{shape.block_size} * shape.num_kv_heads * KvRowUnits(shape.dtype, shape.head_dim);
}

// Separate K and V tensors: [num_blocks, block_size, heads, head_dim] each (kNHD, today's default)
// or [num_blocks, heads, block_size, head_dim] (kHND, FlashInfer).
// With shape.v_dtype set, V has its own dtype and the strides of its own tight pages.
PAGEDKV_HD PagedKvLayout SeparateKvLayout(void* k, void* v, const PagedKvShape& shape,
                                          KvPageOrder order = KvPageOrder::kNHD) {
  PagedKvLayout out = PageLayout(k, v, shape, order, PageElementsOf(shape));
  if (shape.v_dtype == kVDTypeOfK || shape.v_dtype == shape.dtype) return out;
  PagedKvShape v_shape = shape;
  v_shape.dtype = shape.v_dtype;
  const PagedKvLayout v_side = PageLayout(v, v, v_shape, order, PageElementsOf(v_shape));
  out.v_dtype = shape.v_dtype;
  out.v_head_stride = v_side.head_stride;
  out.v_token_stride = v_side.token_stride;
  out.v_block_stride = v_side.block_stride;
  return out;
}

// One joint tensor, K page then V page in each block: [num_blocks, 2, block_size, heads, head_dim]
// (kNHD: vLLM's FlashInfer backend, FlashInfer NHD) or [num_blocks, 2, heads, block_size,
// head_dim] (kHND: FlashInfer HND). `kv` is the tensor's first element; v = kv + one page. K and
// V share shape.dtype (shape.v_dtype is for SeparateKvLayout).
PAGEDKV_HD PagedKvLayout JointKvLayout(void* kv, const PagedKvShape& shape,
                                       KvPageOrder order = KvPageOrder::kNHD) {
  const int64_t page = PageElementsOf(shape);
  void* v = kv == nullptr ? nullptr : static_cast<char*>(kv) + page * DTypeSize(shape.dtype);
  return PageLayout(kv, v, shape, order, 2 * page);
}

// True when every (slot, head) row of `layout` starts at an element offset that is a multiple of
// `n` and head_dim is too, so a kernel may load n consecutive elements of a row as one vector
// (given base pointers aligned to the vector size, which the caller checks). False for a quantized
// dtype (its rows are not vectors of elements) and for mixed K and V dtypes.
PAGEDKV_HD bool RowsAlignedTo(const PagedKvLayout& layout, int32_t n) {
  return !IsQuantizedDType(layout.dtype) && !layout.MixedDTypes() && layout.head_dim % n == 0 &&
         layout.HeadStride() % n == 0 && layout.TokenStride() % n == 0 &&
         layout.BlockStride() % n == 0;
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_PAGED_KV_LAYOUT_H_
