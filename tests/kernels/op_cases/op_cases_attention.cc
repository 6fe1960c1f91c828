// Copyright 2026 The pagedkv Authors.
//
// Op cases of paged attention: a mixed batch (prefill, decode, chunk), few long sequences (the
// CUDA split-K path) over several head shapes, sliding windows on that path, and every strided
// layout of tests/kernels/layout_cases.h with and without split-K. Attention must not write to
// the pages; outputs start as NaN.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/status_macros.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_cases.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_case_util.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv::testing {
namespace {

constexpr Tolerance kAttentionTolerance{1e-4, 1e-5};

// The host side of one attention call: index arrays, q, the pages' bytes and how to lay them out.
struct AttentionInputs {
  std::vector<int32_t> kv_lens, query_start_loc, positions, block_tables;
  std::vector<float> q;
  std::vector<uint8_t> pages;
  // The layout with its first element at `base` (a copy of `pages` in the backend's memory).
  std::function<PagedKvLayout(char* base)> layout;
  PagedAttentionArgs args;  // sizes and flags; pointers and cache are filled in per backend
};

// Sequence s holds kv_lens[s] cached tokens in randomly placed blocks of `block_size`; its last
// scheduled[s] tokens are queried.
void PlaceBatch(const std::vector<int32_t>& kv_lens, const std::vector<int32_t>& scheduled,
                int32_t block_size, int32_t num_blocks, uint32_t seed, AttentionInputs& in) {
  const int32_t max_blocks = in.args.max_blocks_per_seq;
  std::vector<int32_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(seed));
  in.kv_lens = kv_lens;
  in.block_tables.assign(kv_lens.size() * max_blocks, -1);
  in.query_start_loc = {0};
  in.positions.clear();
  size_t next = 0;
  for (size_t s = 0; s < kv_lens.size(); ++s) {
    for (int32_t b = 0; b * block_size < kv_lens[s]; ++b) {
      in.block_tables[s * max_blocks + b] = blocks[next++];
    }
    for (int32_t p = kv_lens[s] - scheduled[s]; p < kv_lens[s]; ++p) in.positions.push_back(p);
    in.query_start_loc.push_back(in.query_start_loc.back() + scheduled[s]);
  }
  in.args.num_tokens = static_cast<int64_t>(in.positions.size());
  in.args.num_seqs = static_cast<int32_t>(kv_lens.size());
}

// Contiguous K then V pages of `shape` (each side in its own dtype) holding random K (seed k_seed,
// in [-2, 2]) and V values.
void FillContiguousPages(const PagedKvLayout& shape, uint32_t k_seed, uint32_t v_seed,
                         AttentionInputs& in) {
  const PagedKvLayout k_side = shape.KSide(), v_side = shape.VSide();
  const int64_t k_bytes = k_side.NumBytes();
  in.pages.assign(static_cast<size_t>(k_bytes + v_side.NumBytes()), 0);
  const int64_t rows = shape.NumSlots() * shape.num_kv_heads, hd = shape.head_dim;
  const std::vector<float> k = RandomFloats(rows * hd, k_seed, -2.0f, 2.0f);
  const std::vector<float> v = RandomFloats(rows * hd, v_seed);
  for (int64_t r = 0; r < rows; ++r) {  // row r at r * RowUnits (a quantized row: its bytes)
    StoreKvRow(in.pages.data(), k_side.dtype, r * k_side.RowUnits(), hd, k.data() + r * hd);
    StoreKvRow(in.pages.data() + k_bytes, v_side.dtype, r * v_side.RowUnits(), hd,
               v.data() + r * hd);
  }
  in.layout = [shape, k_bytes](char* base) {
    PagedKvLayout layout = shape;
    layout.k = base;
    layout.v = base + k_bytes;
    return layout;
  };
}

absl::StatusOr<OpRun> RunAttention(OpBackend& b, const AttentionInputs& in) {
  PAGEDKV_ASSIGN_OR_RETURN(auto q, Upload(b, in.q));
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, Upload(b, in.positions));
  PAGEDKV_ASSIGN_OR_RETURN(auto query_start_loc, Upload(b, in.query_start_loc));
  PAGEDKV_ASSIGN_OR_RETURN(auto kv_lens, Upload(b, in.kv_lens));
  PAGEDKV_ASSIGN_OR_RETURN(auto block_tables, Upload(b, in.block_tables));
  PAGEDKV_ASSIGN_OR_RETURN(auto pages, Upload(b, in.pages));
  PAGEDKV_ASSIGN_OR_RETURN(auto out, OpBuffer<float>::Filled(b, in.q.size(), NAN));
  PagedAttentionArgs args = in.args;
  args.q = q.data();
  args.out = out.data();
  args.positions = positions.data();
  args.query_start_loc = query_start_loc.data();
  args.kv_lens = kv_lens.data();
  args.block_tables = block_tables.data();
  args.cache = in.layout(reinterpret_cast<char*>(pages.data()));
  OpRun run;
  run.status = b.Run(args);
  if (!run.status.ok()) return run;
  PAGEDKV_RETURN_IF_ERROR(AddOutput(out, "out", kAttentionTolerance, run));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<uint8_t> after, pages.Download());
  if (after != in.pages) run.broken.push_back("attention wrote to the pages");
  return run;
}

// 4 sequences (prefill, decode, chunk, decode), GQA 8:2, head_dim 64, 40 blocks of 16; V in
// v_dtype when given.
AttentionInputs MixedBatch(DType dtype, DType v_dtype = kVDTypeOfK) {
  AttentionInputs in;
  in.args.num_q_heads = 8;
  in.args.max_blocks_per_seq = 8;
  PlaceBatch({20, 100, 7, 128}, {20, 1, 3, 1}, 16, 40, 9, in);
  FillContiguousPages({.dtype = dtype,
                       .num_blocks = 40,
                       .block_size = 16,
                       .num_kv_heads = 2,
                       .head_dim = 64,
                       .v_dtype = v_dtype},
                      10, 11, in);
  in.q = RandomFloats(in.args.num_tokens * 8 * 64, 12, -2.0f, 2.0f);
  return in;
}

// Few long sequences (split-K on CUDA) and a short one: decode, prefill chunk, chunk.
struct HeadShape {
  int32_t nq, nkv, hd;
};
AttentionInputs LongSequences(HeadShape shape, DType dtype, uint32_t seed) {
  AttentionInputs in;
  const std::vector<int32_t> kv_lens = {3000, 37, 2100};
  int32_t num_blocks = 0;
  for (int32_t len : kv_lens) num_blocks += (len + 15) / 16;
  in.args.num_q_heads = shape.nq;
  in.args.max_blocks_per_seq = 200;
  PlaceBatch(kv_lens, {1, 5, 3}, 16, num_blocks, seed, in);
  FillContiguousPages({.dtype = dtype,
                       .num_blocks = num_blocks,
                       .block_size = 16,
                       .num_kv_heads = shape.nkv,
                       .head_dim = shape.hd},
                      seed + 1, seed + 2, in);
  in.q = RandomFloats(in.args.num_tokens * shape.nq * shape.hd, seed + 3, -2.0f, 2.0f);
  return in;
}

// Two sequences over one layout case: a decode token at kv_len 1200 (split-K on CUDA) and a
// 4-token chunk. head_dim 128 makes the padded layouts' rows unaligned for 4-wide loads (the
// scalar path); 64 keeps every layout on the vector path.
CaseShape LayoutShape(int32_t hd) {
  return {.num_blocks = 80, .block_size = 16, .num_kv_heads = 2, .head_dim = hd};
}
AttentionInputs OverLayout(const LayoutCase& c, int32_t hd, DType dtype) {
  const CaseShape shape = LayoutShape(hd);
  AttentionInputs in;
  in.args.num_q_heads = 8;
  in.args.max_blocks_per_seq = 76;
  in.args.num_tokens = 5;
  in.args.num_seqs = 2;
  in.kv_lens = {1200, 30};
  in.query_start_loc = {0, 1, 5};
  in.positions = {1199, 26, 27, 28, 29};
  in.block_tables.assign(2 * 76, -1);
  std::vector<int32_t> blocks(shape.num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(90));
  for (int32_t b = 0; b < 75; ++b) in.block_tables[b] = blocks[b];
  in.block_tables[76] = blocks[75];
  in.block_tables[77] = blocks[76];
  in.q = RandomFloats(5 * 8 * hd, 91, -2.0f, 2.0f);
  GuardedPages host(c, dtype, shape);
  const int64_t elements = 2 * int64_t{shape.num_blocks} * shape.block_size * 2 * hd;
  host.SetLogical(RandomFloats(static_cast<size_t>(elements), 92, -2.0f, 2.0f));
  in.pages = host.bytes();
  in.layout = [c, dtype](char* base) { return c.make(base + kGuardBytes, dtype); };
  return in;
}

OpCase AttentionCase(std::string name, std::function<AttentionInputs()> inputs) {
  return {.name = "paged_attention/" + name,
          .ops = {OpFor<PagedAttentionArgs>()},
          .run = [inputs = std::move(inputs)](OpBackend& b) { return RunAttention(b, inputs()); }};
}

}  // namespace

void AddAttentionCases(std::vector<OpCase>& cases) {
  constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  for (DType dtype : kDTypes) {
    cases.push_back(AttentionCase(absl::StrCat("mixed_batch/", DTypeName(dtype)),
                                  [dtype] { return MixedBatch(dtype); }));
  }
  // GQA groups that are and are not a multiple of the head tile; vector and scalar loads.
  for (HeadShape shape : {HeadShape{12, 2, 128}, HeadShape{4, 4, 64}, HeadShape{6, 1, 96},
                          HeadShape{8, 2, 130}, HeadShape{2, 1, 256}}) {
    for (DType dtype : kDTypes) {
      cases.push_back(AttentionCase(absl::StrCat("long_sequences/nq", shape.nq, "_nkv", shape.nkv,
                                                 "_hd", shape.hd, "/", DTypeName(dtype)),
                                    [shape, dtype] { return LongSequences(shape, dtype, 19); }));
    }
  }
  // Quantized pages, dequantized as they are read: every dtype, and head sizes of 2 to 8 blocks.
  for (DType dtype : kQuantizedKvDTypes) {
    cases.push_back(AttentionCase(absl::StrCat("mixed_batch/", DTypeName(dtype)),
                                  [dtype] { return MixedBatch(dtype); }));
    for (HeadShape shape : {HeadShape{12, 2, 128}, HeadShape{6, 1, 96}, HeadShape{2, 1, 256}}) {
      cases.push_back(AttentionCase(absl::StrCat("long_sequences/nq", shape.nq, "_nkv", shape.nkv,
                                                 "_hd", shape.hd, "/", DTypeName(dtype)),
                                    [shape, dtype] { return LongSequences(shape, dtype, 29); }));
    }
  }
  // K and V in different dtypes (llama.cpp's -ctk / -ctv): each side read in its own.
  for (const auto& [k, v] : {std::pair{DType::kQ8_0, DType::kQ4_0},
                             {DType::kBF16, DType::kInt8},
                             {DType::kF16, DType::kQ4_1},
                             {DType::kQ4_0, DType::kF32}}) {
    cases.push_back(
        AttentionCase(absl::StrCat("mixed_batch/", DTypeName(k), "_k_", DTypeName(v), "_v"),
                      [k, v] { return MixedBatch(k, v); }));
  }
  // Windows of 1, inside a partition, across several, and longer than any sequence: partitions
  // wholly before the window are empty, one is cut by it.
  for (int32_t window : {1, 7, 300, 1500, 4096}) {
    cases.push_back(AttentionCase(absl::StrCat("sliding_window/", window, "/bf16"), [window] {
      AttentionInputs in = LongSequences({8, 2, 64}, DType::kBF16, 23);
      in.args.sliding_window = window;
      return in;
    }));
  }
  for (int32_t hd : {64, 128}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const LayoutCase& c : AllLayoutCases(LayoutShape(hd))) {
        cases.push_back(
            AttentionCase(absl::StrCat("layout_", c.name, "/hd", hd, "/", DTypeName(dtype)),
                          [c, hd, dtype] { return OverLayout(c, hd, dtype); }));
      }
    }
  }
}

}  // namespace pagedkv::testing
