// Copyright 2026 The pagedkv Authors.
//
// KV write (reshape_and_cache) and paged attention against float64 references: a flat batch
// mixing a chunked prefill, a decode and a fresh prefill over shuffled block tables, GQA, every KV
// dtype; the permutation property with and without RoPE; bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::ReferenceAttentionFactor;
using ::pagedkv::testing::ReferenceInvFreq;
using ::pagedkv::testing::ReferenceRotate;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kNumBlocks = 32;
constexpr int32_t kNumKvHeads = 2;
constexpr int32_t kNumQHeads = 6;  // GQA group of 3
constexpr int32_t kHeadDim = 32;

struct Pages {
  explicit Pages(DType dtype)
      : k(static_cast<size_t>(kNumBlocks) * kBlockSize * kNumKvHeads * kHeadDim, -7.0f),
        v(k.size(), -7.0f) {
    layout = PagedKvLayout{.k = k.data(),
                           .v = v.data(),
                           .dtype = dtype,
                           .num_blocks = kNumBlocks,
                           .block_size = kBlockSize,
                           .num_kv_heads = kNumKvHeads,
                           .head_dim = kHeadDim};
    for (int64_t i = 0; i < layout.NumElements(); ++i) {  // sentinel in the storage dtype
      StoreElement(layout.k, dtype, i, -7.0f);
      StoreElement(layout.v, dtype, i, -7.0f);
    }
  }
  float K(int64_t slot, int h, int d) const {
    return LoadElement(layout.k, layout.dtype, layout.ElementOffset(slot, h, d));
  }
  float V(int64_t slot, int h, int d) const {
    return LoadElement(layout.v, layout.dtype, layout.ElementOffset(slot, h, d));
  }
  std::vector<float> k, v;  // fp32-sized storage, large enough for every dtype
  PagedKvLayout layout;
};

TEST(ReshapeAndCacheTest, RotatesWritesAndSkipsMinusOne) {
  RopeConfig config;
  config.head_dim = kHeadDim;
  config.scaling = RopeScaling::kYarn;
  config.factor = 2.0;
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  const auto inv = ReferenceInvFreq(config);
  const double af = ReferenceAttentionFactor(config);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    Pages pages(dtype);
    const int64_t n = 4;
    const int64_t row = kNumKvHeads * kHeadDim;
    auto q = RandomFloats(n * kNumQHeads * kHeadDim, 1);
    const auto q0 = q;
    const auto k = RandomFloats(n * row, 2);
    const auto v = RandomFloats(n * row, 3);
    const std::vector<int32_t> positions = {0, 9, 70, 3};  // 70 is beyond the table
    const std::vector<int64_t> slots = {5, -1, 127, 0};
    ReshapeAndCacheArgs args{.q = q.data(),
                             .k = k.data(),
                             .v = v.data(),
                             .positions = positions.data(),
                             .slot_mapping = slots.data(),
                             .num_tokens = n,
                             .num_q_heads = kNumQHeads,
                             .rope = table->View(),
                             .cache = pages.layout};
    ASSERT_TRUE(cpu::ReshapeAndCache(args).ok());
    for (int64_t t = 0; t < n; ++t) {
      for (int h = 0; h < kNumQHeads; ++h) {  // q rotated in place, also for the skipped token
        const float* in = &q0[(t * kNumQHeads + h) * kHeadDim];
        std::vector<double> head(in, in + kHeadDim);
        const auto want = ReferenceRotate(config, inv, af, positions[t], head.data());
        for (int d = 0; d < kHeadDim; ++d) {
          ASSERT_NEAR(q[(t * kNumQHeads + h) * kHeadDim + d], want[d], 2e-6);
        }
      }
      if (slots[t] < 0) continue;
      for (int h = 0; h < kNumKvHeads; ++h) {
        std::vector<double> head(&k[t * row + h * kHeadDim], &k[t * row + (h + 1) * kHeadDim]);
        const auto want = ReferenceRotate(config, inv, af, positions[t], head.data());
        for (int d = 0; d < kHeadDim; ++d) {
          // The stored value is the fp32 result rounded once to the dtype.
          const double u = dtype == DType::kF32 ? 0 : (dtype == DType::kF16 ? 0x1p-11 : 0x1p-8);
          ASSERT_NEAR(pages.K(slots[t], h, d), want[d], 2e-6 + u * std::abs(want[d]));
          ASSERT_EQ(pages.V(slots[t], h, d), RoundToDType(v[t * row + h * kHeadDim + d], dtype));
        }
      }
    }
    // Every slot not in slot_mapping still holds the sentinel.
    for (int64_t slot = 0; slot < pages.layout.NumSlots(); ++slot) {
      if (slot == 5 || slot == 127 || slot == 0) continue;
      ASSERT_EQ(pages.K(slot, 1, 3), RoundToDType(-7.0f, dtype)) << slot;
    }
  }
}

TEST(ReshapeAndCacheTest, BadInputIsInvalidArgumentAndTouchesNothing) {
  RopeConfig config;
  config.head_dim = kHeadDim;
  auto table = RopeTable::Create(config, 16);
  ASSERT_TRUE(table.ok());
  Pages pages(DType::kBF16);
  auto q = RandomFloats(2 * kNumQHeads * kHeadDim, 4);
  const auto k = RandomFloats(2 * kNumKvHeads * kHeadDim, 5);
  const auto q0 = q;
  const auto k_pages0 = pages.k;
  std::vector<int32_t> positions = {1, 2};
  std::vector<int64_t> slots = {3, 128};  // 128 == NumSlots: out of range
  ReshapeAndCacheArgs args{.q = q.data(),
                           .k = k.data(),
                           .v = k.data(),
                           .positions = positions.data(),
                           .slot_mapping = slots.data(),
                           .num_tokens = 2,
                           .num_q_heads = kNumQHeads,
                           .rope = table->View(),
                           .cache = pages.layout};
  EXPECT_EQ(cpu::ReshapeAndCache(args).code(), absl::StatusCode::kInvalidArgument);
  slots[1] = -2;
  EXPECT_EQ(cpu::ReshapeAndCache(args).code(), absl::StatusCode::kInvalidArgument);
  slots[1] = 4;
  positions[0] = -1;
  EXPECT_EQ(cpu::ReshapeAndCache(args).code(), absl::StatusCode::kInvalidArgument);
  positions[0] = 1;
  args.cache.head_dim = 3;  // unsupported head dim
  EXPECT_EQ(cpu::ReshapeAndCache(args).code(), absl::StatusCode::kInvalidArgument);
  args.cache.head_dim = kHeadDim;
  args.cache.dtype = static_cast<DType>(99);  // not a DType value
  EXPECT_EQ(cpu::ReshapeAndCache(args).code(), absl::StatusCode::kInvalidArgument);
  args.cache.dtype = DType::kBF16;
  args.rope.head_dim = 64;  // table for another head size
  EXPECT_EQ(cpu::ReshapeAndCache(args).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(pages.k, k_pages0);
}

// A flat batch of sequences, their dense K/V (as stored) and paged copies.
struct Batch {
  std::vector<int32_t> query_start_loc = {0};
  std::vector<int32_t> kv_lens;
  std::vector<int32_t> positions;
  std::vector<int32_t> block_tables;
  int32_t max_blocks = 0;
};

// Float64 attention of one query head over positions [0, last] of dense per-position K/V rows.
std::vector<double> ReferenceAttention(const float* q, const std::vector<std::vector<float>>& k,
                                       const std::vector<std::vector<float>>& v, int kv_head,
                                       int64_t last, double scale) {
  std::vector<double> scores(last + 1);
  double max_score = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    double s = 0;
    for (int d = 0; d < kHeadDim; ++d) s += double(q[d]) * k[j][kv_head * kHeadDim + d];
    scores[j] = s * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double total = 0;
  for (double& s : scores) total += (s = std::exp(s - max_score));
  std::vector<double> out(kHeadDim, 0.0);
  for (int64_t j = 0; j <= last; ++j) {
    for (int d = 0; d < kHeadDim; ++d) out[d] += scores[j] / total * v[j][kv_head * kHeadDim + d];
  }
  return out;
}

TEST(PagedAttentionTest, MixedBatchMatchesFloat64ForEveryDtype) {
  struct Seq {
    int32_t computed;   // tokens cached before this step
    int32_t scheduled;  // query tokens this step
  };
  const std::vector<Seq> seqs = {{3, 5}, {12, 1}, {0, 6}, {0, 1}, {17, 2}};
  const int64_t row = kNumKvHeads * kHeadDim;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    Pages pages(dtype);
    std::mt19937 rng(7);
    std::vector<int32_t> free_blocks(kNumBlocks);
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
    Batch batch;
    batch.max_blocks = 6;
    std::vector<std::vector<std::vector<float>>> dense_k(seqs.size()), dense_v(seqs.size());
    std::vector<int64_t> slots;
    std::vector<float> k_rows, v_rows;
    size_t next_block = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int32_t kv_len = seqs[s].computed + seqs[s].scheduled;
      std::vector<int32_t> table(batch.max_blocks, -1);
      for (int32_t b = 0; b * kBlockSize < kv_len; ++b) table[b] = free_blocks[next_block++];
      batch.block_tables.insert(batch.block_tables.end(), table.begin(), table.end());
      batch.kv_lens.push_back(kv_len);
      for (int32_t j = 0; j < kv_len; ++j) {
        auto kj = RandomFloats(row, 100 + s * 64 + j);
        auto vj = RandomFloats(row, 200 + s * 64 + j);
        slots.push_back(int64_t{table[j / kBlockSize]} * kBlockSize + j % kBlockSize);
        k_rows.insert(k_rows.end(), kj.begin(), kj.end());
        v_rows.insert(v_rows.end(), vj.begin(), vj.end());
        for (float& x : kj) x = RoundToDType(x, dtype);
        for (float& x : vj) x = RoundToDType(x, dtype);
        dense_k[s].push_back(kj);
        dense_v[s].push_back(vj);
        if (j >= seqs[s].computed) batch.positions.push_back(j);
      }
      batch.query_start_loc.push_back(batch.query_start_loc.back() + seqs[s].scheduled);
    }
    // Write every token's K/V (already "rotated": no RoPE in this test).
    ReshapeAndCacheArgs write{.k = k_rows.data(),
                              .v = v_rows.data(),
                              .slot_mapping = slots.data(),
                              .num_tokens = static_cast<int64_t>(slots.size()),
                              .rotate = false,
                              .rope = {},
                              .cache = pages.layout};
    ASSERT_TRUE(cpu::ReshapeAndCache(write).ok());
    const int64_t num_tokens = batch.positions.size();
    const auto q = RandomFloats(num_tokens * kNumQHeads * kHeadDim, 8, -2.0f, 2.0f);
    std::vector<float> out(q.size(), 0.0f);
    PagedAttentionArgs args{.q = q.data(),
                            .out = out.data(),
                            .positions = batch.positions.data(),
                            .query_start_loc = batch.query_start_loc.data(),
                            .kv_lens = batch.kv_lens.data(),
                            .block_tables = batch.block_tables.data(),
                            .num_tokens = num_tokens,
                            .num_seqs = static_cast<int32_t>(seqs.size()),
                            .num_q_heads = kNumQHeads,
                            .max_blocks_per_seq = batch.max_blocks,
                            .cache = pages.layout};
    ASSERT_TRUE(cpu::PagedAttention(args).ok());
    const double scale = 1.0 / std::sqrt(double(kHeadDim));
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int32_t t = batch.query_start_loc[s]; t < batch.query_start_loc[s + 1]; ++t) {
        for (int h = 0; h < kNumQHeads; ++h) {
          const float* qh = &q[(int64_t{t} * kNumQHeads + h) * kHeadDim];
          const auto want =
              ReferenceAttention(qh, dense_k[s], dense_v[s], h / 3, batch.positions[t], scale);
          for (int d = 0; d < kHeadDim; ++d) {
            ASSERT_NEAR(out[(int64_t{t} * kNumQHeads + h) * kHeadDim + d], want[d], 2e-6)
                << "dtype " << DTypeName(dtype) << " seq " << s << " token " << t;
          }
        }
      }
    }
  }
}

// Self-attention (no causal mask) of one sequence of `n` tokens, with or without RoPE; the
// returned outputs are [n, kNumQHeads, kHeadDim].
std::vector<float> SelfAttention(const std::vector<float>& q_in, const std::vector<float>& k,
                                 const std::vector<float>& v, int32_t n, bool use_rope,
                                 const RopeTableView& rope) {
  Pages pages(DType::kF32);
  std::vector<float> q = q_in;
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<int64_t> slots(n);
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<int32_t> table(kNumBlocks);
  std::iota(table.begin(), table.end(), 0);
  ReshapeAndCacheArgs write{.q = q.data(),
                            .k = k.data(),
                            .v = v.data(),
                            .positions = positions.data(),
                            .slot_mapping = slots.data(),
                            .num_tokens = n,
                            .num_q_heads = kNumQHeads,
                            .rotate = use_rope,
                            .rope = rope,
                            .cache = pages.layout};
  EXPECT_TRUE(cpu::ReshapeAndCache(write).ok());
  std::vector<float> out(q.size());
  const std::vector<int32_t> qsl = {0, n};
  const std::vector<int32_t> kv_lens = {n};
  PagedAttentionArgs args{.q = q.data(),
                          .out = out.data(),
                          .positions = positions.data(),
                          .query_start_loc = qsl.data(),
                          .kv_lens = kv_lens.data(),
                          .block_tables = table.data(),
                          .num_tokens = n,
                          .num_seqs = 1,
                          .num_q_heads = kNumQHeads,
                          .max_blocks_per_seq = kNumBlocks,
                          .causal = false,
                          .cache = pages.layout};
  EXPECT_TRUE(cpu::PagedAttention(args).ok());
  return out;
}

TEST(PagedAttentionTest, PermutationEquivarianceWithoutRopeBrokenByRope) {
  const int32_t n = 12;
  const int64_t q_row = kNumQHeads * kHeadDim;
  const int64_t kv_row = kNumKvHeads * kHeadDim;
  const auto q = RandomFloats(n * q_row, 9, -2.0f, 2.0f);
  const auto k = RandomFloats(n * kv_row, 10, -2.0f, 2.0f);
  const auto v = RandomFloats(n * kv_row, 11);
  std::vector<int32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(12));
  auto permute = [&](const std::vector<float>& x, int64_t r) {
    std::vector<float> y(x.size());
    for (int32_t i = 0; i < n; ++i) {
      std::copy(x.begin() + perm[i] * r, x.begin() + (perm[i] + 1) * r, y.begin() + i * r);
    }
    return y;
  };
  RopeConfig config;
  config.head_dim = kHeadDim;
  config.base = 100.0;  // fast rotations make the order visible at short range
  auto table = RopeTable::Create(config, 64);
  ASSERT_TRUE(table.ok());
  for (bool use_rope : {false, true}) {
    const auto out = SelfAttention(q, k, v, n, use_rope, table->View());
    const auto out_perm = SelfAttention(permute(q, q_row), permute(k, kv_row), permute(v, kv_row),
                                        n, use_rope, table->View());
    const auto expected = permute(out, q_row);
    double max_diff = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      max_diff = std::max(max_diff, double(std::abs(out_perm[i] - expected[i])));
    }
    if (use_rope) {
      EXPECT_GT(max_diff, 1e-2) << "RoPE makes attention depend on the order";
    } else {
      EXPECT_LT(max_diff, 1e-5) << "without positions attention is permutation-equivariant";
    }
  }
}

TEST(PagedAttentionTest, BadInputIsInvalidArgumentAndOutputUntouched) {
  Pages pages(DType::kF16);
  const auto q = RandomFloats(2 * kNumQHeads * kHeadDim, 13);
  std::vector<float> out(q.size(), 5.0f);
  std::vector<int32_t> positions = {3, 4};
  std::vector<int32_t> qsl = {0, 2};
  std::vector<int32_t> kv_lens = {5};
  std::vector<int32_t> table = {2, 9};
  PagedAttentionArgs args{.q = q.data(),
                          .out = out.data(),
                          .positions = positions.data(),
                          .query_start_loc = qsl.data(),
                          .kv_lens = kv_lens.data(),
                          .block_tables = table.data(),
                          .num_tokens = 2,
                          .num_seqs = 1,
                          .num_q_heads = kNumQHeads,
                          .max_blocks_per_seq = 2,
                          .cache = pages.layout};
  ASSERT_TRUE(cpu::PagedAttention(args).ok());
  std::fill(out.begin(), out.end(), 5.0f);
  auto expect_invalid = [&](PagedAttentionArgs a) {
    EXPECT_EQ(cpu::PagedAttention(a).code(), absl::StatusCode::kInvalidArgument);
  };
  table[1] = kNumBlocks;  // block id out of range
  expect_invalid(args);
  table[1] = 9;
  kv_lens[0] = 9;  // more than max_blocks_per_seq * block_size
  expect_invalid(args);
  kv_lens[0] = 5;
  qsl[1] = 3;  // does not end at num_tokens
  expect_invalid(args);
  qsl[1] = 2;
  PagedAttentionArgs gqa = args;
  gqa.num_q_heads = 5;  // not a multiple of num_kv_heads
  expect_invalid(gqa);
  PagedAttentionArgs head = args;
  head.cache.head_dim = 300;
  expect_invalid(head);
  positions[1] = -4;
  expect_invalid(args);
  EXPECT_EQ(out, std::vector<float>(q.size(), 5.0f));
}

}  // namespace
}  // namespace pagedkv
