// Copyright 2026 The pagedkv Authors.
//
// Paged-KV layouts the kernel tests run every page op over: separate K and V tensors (NHD through
// the zero-stride aggregate, HND through the helper), joint tensors (vLLM's NHD, FlashInfer's HND),
// and two padded layouts (gaps between heads, tokens and blocks; a gap between the K and V pages).
// Each case writes its element index formula out plainly, from the tensor shape, independent of
// PagedKvLayout's offset helpers, and builds the layout under test over a guarded byte buffer:
// every byte that is not an element of K or V holds kGuardByte and must keep it.
#ifndef PAGEDKV_TESTS_KERNELS_LAYOUT_CASES_H_
#define PAGEDKV_TESTS_KERNELS_LAYOUT_CASES_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/paged_kv_layout.h"

namespace pagedkv::testing {

inline constexpr uint8_t kGuardByte = 0xa5;
inline constexpr int64_t kGuardBytes = 64;  // before the first and after the last element

// The pool shape every case uses (odd head count, so heads and tokens cannot be confused).
struct CaseShape {
  int32_t num_blocks = 5;
  int32_t block_size = 4;
  int32_t num_kv_heads = 3;
  int32_t head_dim = 16;
  int64_t Page() const { return int64_t{block_size} * num_kv_heads * head_dim; }
};

struct LayoutCase {
  std::string name;
  // Element index from the buffer base of (kv: 0 K / 1 V, block, token of the block, head, d).
  std::function<int64_t(int kv, int64_t b, int64_t t, int64_t h, int64_t d)> index;
  // The layout under test with its first K element at `base` (every case's index(0,0,0,0,0) is 0).
  std::function<PagedKvLayout(char* base, DType dtype)> make;
};

inline std::vector<LayoutCase> AllLayoutCases(const CaseShape& s = {}) {
  const int64_t nb = s.num_blocks, bs = s.block_size, nh = s.num_kv_heads, hd = s.head_dim;
  const int64_t page = s.Page();
  const int64_t sep = nb * page + 8;  // separate tensors: V starts 8 elements after K ends
  const auto shape = [s](DType dtype) {
    return PagedKvShape{.dtype = dtype,
                        .num_blocks = s.num_blocks,
                        .block_size = s.block_size,
                        .num_kv_heads = s.num_kv_heads,
                        .head_dim = s.head_dim};
  };
  const auto at = [](char* base, DType dtype, int64_t elements) {
    return base + elements * DTypeSize(dtype);
  };
  std::vector<LayoutCase> cases;
  cases.push_back({"separate_nhd_default",
                   [=](int kv, int64_t b, int64_t t, int64_t h, int64_t d) {
                     return kv * sep + ((b * bs + t) * nh + h) * hd + d;
                   },
                   [=](char* base, DType dtype) {
                     return PagedKvLayout{.k = base,
                                          .v = at(base, dtype, sep),
                                          .dtype = dtype,
                                          .num_blocks = s.num_blocks,
                                          .block_size = s.block_size,
                                          .num_kv_heads = s.num_kv_heads,
                                          .head_dim = s.head_dim};
                   }});
  cases.push_back({"separate_hnd",
                   [=](int kv, int64_t b, int64_t t, int64_t h, int64_t d) {
                     return kv * sep + ((b * nh + h) * bs + t) * hd + d;
                   },
                   [=](char* base, DType dtype) {
                     return SeparateKvLayout(base, at(base, dtype, sep), shape(dtype),
                                             KvPageOrder::kHND);
                   }});
  cases.push_back({"joint_nhd_vllm",
                   [=](int kv, int64_t b, int64_t t, int64_t h, int64_t d) {
                     return (((b * 2 + kv) * bs + t) * nh + h) * hd + d;
                   },
                   [=](char* base, DType dtype) { return JointKvLayout(base, shape(dtype)); }});
  cases.push_back({"joint_hnd_flashinfer",
                   [=](int kv, int64_t b, int64_t t, int64_t h, int64_t d) {
                     return (((b * 2 + kv) * nh + h) * bs + t) * hd + d;
                   },
                   [=](char* base, DType dtype) {
                     return JointKvLayout(base, shape(dtype), KvPageOrder::kHND);
                   }});
  // Padding: 4 elements after each head, 6 after each token's heads, 10 after each block.
  const int64_t head_stride = hd + 4;
  const int64_t token_stride = nh * head_stride + 6;
  const int64_t block_stride = bs * token_stride + 10;
  const int64_t padded_sep = nb * block_stride + 2;
  cases.push_back(
      {"separate_nhd_padded",
       [=](int kv, int64_t b, int64_t t, int64_t h, int64_t d) {
         return kv * padded_sep + b * block_stride + t * token_stride + h * head_stride + d;
       },
       [=](char* base, DType dtype) {
         PagedKvLayout layout = SeparateKvLayout(base, at(base, dtype, padded_sep), shape(dtype));
         layout.head_stride = head_stride;
         layout.token_stride = token_stride;
         layout.block_stride = block_stride;
         return layout;
       }});
  // Joint HND pages with 12 elements between the K and V pages and 40 after each block.
  const int64_t joint_block = 2 * page + 12 + 40;
  cases.push_back({"joint_hnd_padded",
                   [=](int kv, int64_t b, int64_t t, int64_t h, int64_t d) {
                     return b * joint_block + kv * (page + 12) + (h * bs + t) * hd + d;
                   },
                   [=](char* base, DType dtype) {
                     PagedKvLayout layout = JointKvLayout(base, shape(dtype), KvPageOrder::kHND);
                     layout.v = at(base, dtype, page + 12);
                     layout.block_stride = joint_block;
                     return layout;
                   }});
  return cases;
}

// A case's K and V elements over a guarded host buffer.
class GuardedPages {
 public:
  GuardedPages(const LayoutCase& c, DType dtype, const CaseShape& s = {})
      : case_(c), dtype_(dtype), shape_(s) {
    int64_t max_index = 0;
    ForEachElement([&](int, int64_t, int64_t, int64_t, int64_t, int64_t index) {
      max_index = index > max_index ? index : max_index;
    });
    const int64_t es = DTypeSize(dtype);
    bytes_.assign(static_cast<size_t>((max_index + 1) * es + 2 * kGuardBytes), kGuardByte);
    is_element_.assign(bytes_.size(), false);
    ForEachElement([&](int, int64_t, int64_t, int64_t, int64_t, int64_t index) {
      for (int64_t i = 0; i < es; ++i) is_element_[kGuardBytes + index * es + i] = true;
    });
    layout_ = c.make(Base(), dtype);
  }
  GuardedPages(const GuardedPages&) = delete;  // layout() points into bytes()
  GuardedPages& operator=(const GuardedPages&) = delete;

  // f(kv, block, token, head, d, element index) for every element of K and V.
  template <typename F>
  void ForEachElement(F f) const {
    for (int kv = 0; kv < 2; ++kv) {
      for (int64_t b = 0; b < shape_.num_blocks; ++b) {
        for (int64_t t = 0; t < shape_.block_size; ++t) {
          for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
            for (int64_t d = 0; d < shape_.head_dim; ++d)
              f(kv, b, t, h, d, case_.index(kv, b, t, h, d));
          }
        }
      }
    }
  }

  char* Base() { return reinterpret_cast<char*>(bytes_.data()) + kGuardBytes; }
  const PagedKvLayout& layout() const { return layout_; }
  std::vector<uint8_t>& bytes() { return bytes_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  // Element (kv, slot, head, d) through the case's own index formula, of this buffer or of a copy
  // of it (`bytes`, e.g. downloaded from the device).
  float Get(int kv, int64_t slot, int64_t h, int64_t d) const {
    return Get(bytes_, kv, slot, h, d);
  }
  float Get(const std::vector<uint8_t>& bytes, int kv, int64_t slot, int64_t h, int64_t d) const {
    const int64_t bs = shape_.block_size;
    return LoadElement(bytes.data() + kGuardBytes, dtype_,
                       case_.index(kv, slot / bs, slot % bs, h, d));
  }
  void Set(int kv, int64_t slot, int64_t h, int64_t d, float value) {
    const int64_t bs = shape_.block_size;
    StoreElement(Base(), dtype_, case_.index(kv, slot / bs, slot % bs, h, d), value);
  }

  // Every element in (kv, slot, head, d) order: the layout-independent contents.
  std::vector<float> Logical() const { return Logical(bytes_); }
  std::vector<float> Logical(const std::vector<uint8_t>& bytes) const {
    std::vector<float> out;
    const int64_t slots = int64_t{shape_.num_blocks} * shape_.block_size;
    for (int kv = 0; kv < 2; ++kv) {
      for (int64_t slot = 0; slot < slots; ++slot) {
        for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
          for (int64_t d = 0; d < shape_.head_dim; ++d) out.push_back(Get(bytes, kv, slot, h, d));
        }
      }
    }
    return out;
  }
  // Stores `logical` (Logical() order).
  void SetLogical(const std::vector<float>& logical) {
    size_t i = 0;
    const int64_t slots = int64_t{shape_.num_blocks} * shape_.block_size;
    for (int kv = 0; kv < 2; ++kv) {
      for (int64_t slot = 0; slot < slots; ++slot) {
        for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
          for (int64_t d = 0; d < shape_.head_dim; ++d) Set(kv, slot, h, d, logical[i++]);
        }
      }
    }
  }

  // Number of bytes outside the elements that lost kGuardByte.
  int64_t DamagedGuardBytes() const { return DamagedGuardBytes(bytes_); }
  int64_t DamagedGuardBytes(const std::vector<uint8_t>& bytes) const {
    int64_t damaged = 0;
    for (size_t i = 0; i < bytes.size(); ++i) damaged += !is_element_[i] && bytes[i] != kGuardByte;
    return damaged;
  }

 private:
  LayoutCase case_;
  DType dtype_;
  CaseShape shape_;
  std::vector<uint8_t> bytes_;
  std::vector<bool> is_element_;
  PagedKvLayout layout_;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_LAYOUT_CASES_H_
