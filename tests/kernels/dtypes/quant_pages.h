// Copyright 2026 The pagedkv Authors.
//
// Test helpers for KV pages of any dtype: QuantPages (one layer's K and V pages, contiguous NHD,
// filled with 0x5a so untouched rows show) and Quantize (a row's bytes from QuantizeKvRow).
#ifndef PAGEDKV_TESTS_KERNELS_DTYPES_QUANT_PAGES_H_
#define PAGEDKV_TESTS_KERNELS_DTYPES_QUANT_PAGES_H_

#include <cstdint>
#include <vector>

#include "pagedkv/dtype.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/paged_kv_layout.h"

namespace pagedkv::testing {

// The bytes of `x` quantized as one row of `dtype` (0xee where QuantizeKvRow writes nothing).
inline std::vector<unsigned char> Quantize(DType dtype, const std::vector<float>& x) {
  std::vector<unsigned char> row(static_cast<size_t>(KvRowBytes(dtype, std::ssize(x))), 0xee);
  QuantizeKvRow(dtype, x.data(), static_cast<int32_t>(x.size()), row.data());
  return row;
}

// KV pages of one layer (any dtype), contiguous NHD.
struct QuantPages {
  QuantPages(DType dtype, int32_t num_blocks, int32_t block_size, int32_t heads, int32_t hd) {
    layout = PagedKvLayout{.dtype = dtype,
                           .num_blocks = num_blocks,
                           .block_size = block_size,
                           .num_kv_heads = heads,
                           .head_dim = hd};
    bytes.assign(static_cast<size_t>(2 * layout.NumBytes()), 0x5a);
    layout.k = bytes.data();
    layout.v = bytes.data() + layout.NumBytes();
  }
  std::vector<float> Row(const void* base, int64_t slot, int32_t head) const {
    std::vector<float> out(static_cast<size_t>(layout.head_dim));
    LoadKvRow(base, layout.dtype, layout.SlotOffset(slot) + head * layout.HeadStride(),
              layout.head_dim, out.data());
    return out;
  }
  // Copies the pages; the copy's layout points at its own bytes.
  QuantPages(const QuantPages& other) : bytes(other.bytes), layout(other.layout) {
    layout.k = bytes.data();
    layout.v = bytes.data() + layout.NumBytes();
  }
  QuantPages& operator=(const QuantPages&) = delete;
  std::vector<unsigned char> RowBytes(const void* base, int64_t slot, int32_t head) const {
    const int64_t unit = DTypeSize(layout.dtype);
    const auto* p = static_cast<const unsigned char*>(base) +
                    (layout.SlotOffset(slot) + head * layout.HeadStride()) * unit;
    return std::vector<unsigned char>(p, p + layout.RowUnits() * unit);
  }
  std::vector<unsigned char> bytes;
  PagedKvLayout layout;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_DTYPES_QUANT_PAGES_H_
