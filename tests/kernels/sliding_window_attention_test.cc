// Copyright 2026 The pagedkv Authors.
//
// Paged attention with a sliding window (PagedAttentionArgs::sliding_window) against a float64
// reference that applies transformers' sliding-window causal mask: the query at position i reads
// key j iff j <= i and i - j < W. A flat batch mixes a chunked prefill, a decode and a fresh
// prefill over shuffled block tables, for several windows (1, inside a block, across blocks, at
// least the sequence: full attention), block sizes and dtypes, with GQA. Also the shared key-range
// math (AttentionFirstKey, PartitionKeyRange clipped to the window) and bad windows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/attention_split.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

constexpr int32_t kNumKvHeads = 2;
constexpr int32_t kNumQHeads = 6;  // GQA group of 3
constexpr int32_t kHeadDim = 16;

// A query at `position` reads key j iff the mask says so (written from the formula, not from
// AttentionFirstKey): causal j <= i, and i - j < W when W > 0.
bool Visible(int64_t i, int64_t j, int32_t window) {
  return j <= i && (window <= 0 || i - j < window);
}

// Float64 softmax(q K^T * scale) V of one head over the keys `Visible` allows, of dense rows.
std::vector<double> ReferenceWindowAttention(const float* q,
                                             const std::vector<std::vector<float>>& k,
                                             const std::vector<std::vector<float>>& v, int kv_head,
                                             int64_t position, int32_t window, double scale) {
  std::vector<double> scores(k.size(), -INFINITY);
  double max_score = -INFINITY;
  for (size_t j = 0; j < k.size(); ++j) {
    if (!Visible(position, static_cast<int64_t>(j), window)) continue;
    double s = 0;
    for (int d = 0; d < kHeadDim; ++d) s += double(q[d]) * k[j][kv_head * kHeadDim + d];
    scores[j] = s * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double total = 0;
  for (double& s : scores) total += (s = std::exp(s - max_score));
  std::vector<double> out(kHeadDim, 0.0);
  for (size_t j = 0; j < k.size(); ++j) {
    for (int d = 0; d < kHeadDim; ++d) out[d] += scores[j] / total * v[j][kv_head * kHeadDim + d];
  }
  return out;
}

struct Seq {
  int32_t computed;   // tokens cached before this step
  int32_t scheduled;  // query tokens this step
};

// Pages, dense copies and the batch of one test case.
struct WindowCase {
  WindowCase(DType dtype, int32_t block_size, const std::vector<Seq>& seqs)
      : block_size(block_size), num_blocks(96) {
    const int64_t row = kNumKvHeads * kHeadDim;
    k.assign(static_cast<size_t>(num_blocks) * block_size * row, -7.0f);
    v.assign(k.size(), -7.0f);
    layout = PagedKvLayout{.k = k.data(),
                           .v = v.data(),
                           .dtype = dtype,
                           .num_blocks = num_blocks,
                           .block_size = block_size,
                           .num_kv_heads = kNumKvHeads,
                           .head_dim = kHeadDim};
    std::mt19937 rng(11 + block_size);
    std::vector<int32_t> free_blocks(num_blocks);
    std::iota(free_blocks.begin(), free_blocks.end(), 0);
    std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
    max_blocks = 0;
    for (const Seq& s : seqs) {
      max_blocks = std::max(max_blocks, (s.computed + s.scheduled + block_size - 1) / block_size);
    }
    size_t next_block = 0;
    std::vector<int64_t> slots;
    std::vector<float> k_rows, v_rows;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int32_t kv_len = seqs[s].computed + seqs[s].scheduled;
      std::vector<int32_t> table(max_blocks, -1);
      for (int32_t b = 0; b * block_size < kv_len; ++b) table[b] = free_blocks[next_block++];
      block_tables.insert(block_tables.end(), table.begin(), table.end());
      kv_lens.push_back(kv_len);
      dense_k.emplace_back();
      dense_v.emplace_back();
      for (int32_t j = 0; j < kv_len; ++j) {
        auto kj = RandomFloats(row, 100 + s * 97 + j, -2.0f, 2.0f);
        auto vj = RandomFloats(row, 300 + s * 97 + j);
        slots.push_back(int64_t{table[j / block_size]} * block_size + j % block_size);
        k_rows.insert(k_rows.end(), kj.begin(), kj.end());
        v_rows.insert(v_rows.end(), vj.begin(), vj.end());
        for (float& x : kj) x = RoundToDType(x, dtype);
        for (float& x : vj) x = RoundToDType(x, dtype);
        dense_k[s].push_back(kj);
        dense_v[s].push_back(vj);
        if (j >= seqs[s].computed) positions.push_back(j);
      }
      query_start_loc.push_back(query_start_loc.back() + seqs[s].scheduled);
    }
    ReshapeAndCacheArgs write{.k = k_rows.data(),
                              .v = v_rows.data(),
                              .slot_mapping = slots.data(),
                              .num_tokens = static_cast<int64_t>(slots.size()),
                              .rotate = false,
                              .rope = {},
                              .cache = layout};
    status = cpu::ReshapeAndCache(write);
    q = RandomFloats(positions.size() * kNumQHeads * kHeadDim, 8, -2.0f, 2.0f);
  }

  PagedAttentionArgs Args(float* out, int32_t window) const {
    return PagedAttentionArgs{.q = q.data(),
                              .out = out,
                              .positions = positions.data(),
                              .query_start_loc = query_start_loc.data(),
                              .kv_lens = kv_lens.data(),
                              .block_tables = block_tables.data(),
                              .num_tokens = static_cast<int64_t>(positions.size()),
                              .num_seqs = static_cast<int32_t>(kv_lens.size()),
                              .num_q_heads = kNumQHeads,
                              .max_blocks_per_seq = max_blocks,
                              .sliding_window = window,
                              .cache = layout};
  }

  int32_t block_size;
  int32_t num_blocks;
  int32_t max_blocks;
  std::vector<float> k, v, q;
  PagedKvLayout layout;
  std::vector<int32_t> query_start_loc = {0};
  std::vector<int32_t> kv_lens, positions, block_tables;
  std::vector<std::vector<std::vector<float>>> dense_k, dense_v;
  absl::Status status;
};

TEST(SlidingWindowAttentionTest, MixedBatchMatchesMaskedFloat64) {
  // A chunked prefill (cached 3, 9 new), a long decode, a fresh prefill and a one-token prompt.
  const std::vector<Seq> seqs = {{3, 9}, {40, 1}, {0, 13}, {0, 1}};
  const double scale = 1.0 / std::sqrt(double(kHeadDim));
  int checked = 0;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (int32_t block_size : {1, 4, 16}) {
      const WindowCase c(dtype, block_size, seqs);
      ASSERT_TRUE(c.status.ok()) << c.status;
      // 0: full; 1: the query alone; inside a block; across blocks; >= every length.
      for (int32_t window : {0, 1, 2, 3, 5, 17, 41, 1000}) {
        std::vector<float> out(c.q.size(), 9.0f);
        ASSERT_TRUE(cpu::PagedAttention(c.Args(out.data(), window)).ok());
        for (size_t s = 0; s < seqs.size(); ++s) {
          for (int32_t t = c.query_start_loc[s]; t < c.query_start_loc[s + 1]; ++t) {
            for (int h = 0; h < kNumQHeads; ++h) {
              const int64_t at = (int64_t{t} * kNumQHeads + h) * kHeadDim;
              const auto want = ReferenceWindowAttention(&c.q[at], c.dense_k[s], c.dense_v[s],
                                                         h / 3, c.positions[t], window, scale);
              for (int d = 0; d < kHeadDim; ++d) {
                ASSERT_NEAR(out[at + d], want[d], 3e-6)
                    << "dtype " << DTypeName(dtype) << " block_size " << block_size << " window "
                    << window << " seq " << s << " token " << t << " head " << h;
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 3 * 8 * (9 + 1 + 13 + 1) * kNumQHeads);
}

TEST(SlidingWindowAttentionTest, WindowOfOneReturnsTheQueryTokensOwnValue) {
  const WindowCase c(DType::kF32, 4, {{5, 3}});
  ASSERT_TRUE(c.status.ok()) << c.status;
  std::vector<float> out(c.q.size(), 0.0f);
  ASSERT_TRUE(cpu::PagedAttention(c.Args(out.data(), 1)).ok());
  for (int32_t t = 0; t < 3; ++t) {
    for (int h = 0; h < kNumQHeads; ++h) {
      for (int d = 0; d < kHeadDim; ++d) {
        ASSERT_EQ(out[(int64_t{t} * kNumQHeads + h) * kHeadDim + d],
                  c.dense_v[0][c.positions[t]][(h / 3) * kHeadDim + d]);
      }
    }
  }
}

// A hybrid KV cache releases blocks wholly before a window (issue 31): their table entries may be
// kNullBlock (-1), and the result is that of the full table; a -1 the window reads is refused.
TEST(SlidingWindowAttentionTest, NullBlocksBeforeTheWindowAreAccepted) {
  WindowCase c(DType::kF32, 4, {{13, 3}});  // queries at 13..15, window 5: keys from 9 (block 2)
  ASSERT_TRUE(c.status.ok()) << c.status;
  std::vector<float> full(c.q.size(), 0.0f), released(c.q.size(), 0.0f);
  ASSERT_TRUE(cpu::PagedAttention(c.Args(full.data(), 5)).ok());
  c.block_tables[0] = -1;
  c.block_tables[1] = -1;
  ASSERT_TRUE(cpu::PagedAttention(c.Args(released.data(), 5)).ok());
  EXPECT_EQ(released, full);
  c.block_tables[2] = -1;  // holds key 9, which query 13 reads
  const absl::Status s = cpu::PagedAttention(c.Args(released.data(), 5));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(cpu::PagedAttention(c.Args(released.data(), 0)).code(),
            absl::StatusCode::kInvalidArgument);  // full attention reads every block
}

TEST(SlidingWindowAttentionTest, FirstKeyFollowsTheMaskInequality) {
  for (int64_t position : {0, 1, 5, 63, 1000}) {
    for (int64_t window : {0, 1, 2, 7, 64, 5000}) {
      int64_t want = 0;  // smallest j with Visible(position, j, window)
      while (!Visible(position, want, static_cast<int32_t>(window))) ++want;
      EXPECT_EQ(AttentionFirstKey(/*causal=*/true, window, position), want)
          << "position " << position << " window " << window;
      EXPECT_EQ(AttentionFirstKey(/*causal=*/false, window, position), 0);
    }
  }
}

TEST(SlidingWindowAttentionTest, PartitionsFromTheWindowStartCoverItExactlyOnce) {
  for (int64_t position : {0, 9, 40, 95}) {
    for (int64_t window : {1, 3, 16, 33, 200}) {
      const int64_t first = AttentionFirstKey(true, window, position);
      const int64_t last = AttentionLastKey(true, position, /*kv_len=*/96);
      for (int64_t partition_size : {1, 5, 16, 96}) {
        std::vector<int> seen(96, 0);
        // As many partitions as the window (at most the 96 keys) needs, as the CUDA plan sizes.
        for (int64_t i = 0; i * partition_size < std::min<int64_t>(window, 96); ++i) {
          int64_t begin, end;
          PartitionKeyRange(first, last, partition_size, i, &begin, &end);
          for (int64_t j = begin; j < end; ++j) ++seen[j];
        }
        for (int64_t j = 0; j < 96; ++j) {
          ASSERT_EQ(seen[j], Visible(position, j, static_cast<int32_t>(window)) ? 1 : 0)
              << "position " << position << " window " << window << " size " << partition_size
              << " key " << j;
        }
      }
    }
  }
}

TEST(SlidingWindowAttentionTest, BadWindowIsInvalidArgumentAndOutputUntouched) {
  const WindowCase c(DType::kF32, 4, {{2, 2}});
  ASSERT_TRUE(c.status.ok()) << c.status;
  std::vector<float> out(c.q.size(), 5.0f);
  const absl::Status negative = cpu::PagedAttention(c.Args(out.data(), -1));
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("sliding_window must be >= 0"), std::string::npos) << negative;
  PagedAttentionArgs not_causal = c.Args(out.data(), 4);
  not_causal.causal = false;
  const absl::Status s = cpu::PagedAttention(not_causal);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("needs causal"), std::string::npos) << s;
  EXPECT_EQ(out, std::vector<float>(c.q.size(), 5.0f));
}

}  // namespace
}  // namespace pagedkv
