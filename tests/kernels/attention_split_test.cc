// Copyright 2026 The pagedkv Authors.
//
// Split-K (flash-decoding) attention math on the CPU: attention computed partition by partition
// with the shared PAGEDKV_HD functions the CUDA kernels use (AttentionLastKey, PartitionKeyRange,
// OnlineSoftmax, MergeAttentionState) matches a float64 reference for several partition sizes,
// including partitions past a token's causal limit (empty) and partitions the limit cuts; and the
// partition-count heuristic keeps its documented bounds.
#include "kernels/attention_split.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/softmax_math.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

constexpr int kHeadDim = 24;

// Keys and values of one (sequence, kv head): [kv_len, kHeadDim] each.
struct Sequence {
  int64_t kv_len = 0;
  std::vector<float> k, v;
};

// Float64 causal attention of q over keys [0, last].
std::vector<double> Reference(const float* q, const Sequence& seq, int64_t last, double scale) {
  std::vector<double> scores(last + 1);
  double max_score = -INFINITY;
  for (int64_t j = 0; j <= last; ++j) {
    double s = 0;
    for (int d = 0; d < kHeadDim; ++d) s += double(q[d]) * seq.k[j * kHeadDim + d];
    scores[j] = s * scale;
    max_score = std::max(max_score, scores[j]);
  }
  double total = 0;
  for (double& s : scores) total += (s = std::exp(s - max_score));
  std::vector<double> out(kHeadDim, 0.0);
  for (int64_t j = 0; j <= last; ++j) {
    for (int d = 0; d < kHeadDim; ++d) out[d] += scores[j] / total * seq.v[j * kHeadDim + d];
  }
  return out;
}

// One partition's partial state and unnormalised accumulator, as the CUDA partition kernel
// computes it (in its case over several warps merged with the same MergeAttentionState).
struct Partial {
  OnlineSoftmax state;
  std::vector<float> acc = std::vector<float>(kHeadDim, 0.0f);
};

Partial AttendRange(const float* q, const Sequence& seq, int64_t begin, int64_t end, float scale) {
  Partial part;
  for (int64_t j = begin; j < end; ++j) {
    float dot = 0.0f;
    for (int d = 0; d < kHeadDim; ++d) dot += q[d] * seq.k[j * kHeadDim + d];
    float rescale, p;
    part.state.Update(dot * scale, &rescale, &p);
    for (int d = 0; d < kHeadDim; ++d) {
      part.acc[d] = part.acc[d] * rescale + p * seq.v[j * kHeadDim + d];
    }
  }
  return part;
}

// Attention of q at `position` by partitions of `partition_size` keys over a key capacity of
// `capacity`, merged in `order` (a permutation of the partition indices).
std::vector<float> SplitAttention(const float* q, const Sequence& seq, int64_t position,
                                  int64_t capacity, int64_t partition_size,
                                  const std::vector<int64_t>& order, float scale,
                                  int* empty_partitions, int* cut_partitions) {
  const int64_t last = AttentionLastKey(/*causal=*/true, position, seq.kv_len);
  std::vector<Partial> parts;
  for (int64_t i = 0; i * partition_size < capacity; ++i) {
    int64_t begin, end;
    PartitionKeyRange(last, partition_size, i, &begin, &end);
    if (begin >= end) ++*empty_partitions;
    if (begin < end && end < begin + partition_size) ++*cut_partitions;
    Partial part = AttendRange(q, seq, begin, end, scale);
    if (begin >= end) {
      EXPECT_TRUE(part.state.Empty());
      // An empty partition's accumulator is never read: poison it to prove it.
      std::fill(part.acc.begin(), part.acc.end(), NAN);
    }
    parts.push_back(std::move(part));
  }
  EXPECT_EQ(order.size(), parts.size());
  OnlineSoftmax total;
  std::vector<float> acc(kHeadDim, 0.0f);
  for (int64_t i : order) {
    MergeAttentionState(&total, acc.data(), parts[i].state, parts[i].acc.data(), kHeadDim);
  }
  const float inv = total.InverseSum();
  for (float& x : acc) x *= inv;
  return acc;
}

TEST(AttentionSplitTest, PartitionedAttentionMatchesFloat64ForEveryPartitionSize) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const int64_t capacity = 80;
  std::mt19937 rng(3);
  int empty = 0, cut = 0, checked = 0;
  for (int64_t kv_len : {1, 2, 17, 64, 80}) {
    Sequence seq{kv_len, RandomFloats(kv_len * kHeadDim, 30 + kv_len, -2.0f, 2.0f),
                 RandomFloats(kv_len * kHeadDim, 60 + kv_len)};
    // Decode (last position), a mid-sequence prefill token, the first token, and a position past
    // kv_len (reads all keys).
    for (int64_t position : {kv_len - 1, kv_len / 2, int64_t{0}, kv_len + 5}) {
      const auto q = RandomFloats(kHeadDim, 90 + position + kv_len, -2.0f, 2.0f);
      const int64_t last = AttentionLastKey(true, position, kv_len);
      const auto want = Reference(q.data(), seq, last, scale);
      for (int64_t partition_size : {1, 3, 16, 33, 80, 200}) {
        const int64_t num_partitions = (capacity + partition_size - 1) / partition_size;
        std::vector<int64_t> order(num_partitions);
        std::iota(order.begin(), order.end(), 0);
        for (bool shuffled : {false, true}) {
          if (shuffled) std::shuffle(order.begin(), order.end(), rng);
          const auto got = SplitAttention(q.data(), seq, position, capacity, partition_size, order,
                                          scale, &empty, &cut);
          for (int d = 0; d < kHeadDim; ++d) {
            ASSERT_NEAR(got[d], want[d], 2e-6)
                << "kv_len " << kv_len << " position " << position << " partition_size "
                << partition_size << " shuffled " << shuffled << " d " << d;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 5 * 4 * 6 * 2);
  EXPECT_GT(empty, 0);  // the cases above include partitions past the causal limit ...
  EXPECT_GT(cut, 0);    // ... and partitions the limit cuts short
}

// Split-K under a sliding window as the CUDA plan runs it: partitions tile the token's keys from
// its window's first key, and only ceil(min(window, kv_len) / partition_size) of them are
// launched; merged, they match float64 attention over keys [p - W + 1, p] (clipped at 0).
TEST(AttentionSplitTest, WindowedPartitionsFromTheFirstKeyMatchFloat64) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const int64_t kv_len = 150;
  const Sequence seq{kv_len, RandomFloats(kv_len * kHeadDim, 31, -2.0f, 2.0f),
                     RandomFloats(kv_len * kHeadDim, 32)};
  int checked = 0;
  for (int64_t window : {1, 2, 7, 64, 149, 150, 1000}) {
    for (int64_t position : {kv_len - 1, int64_t{70}, int64_t{3}, int64_t{0}}) {
      const auto q = RandomFloats(kHeadDim, 33 + position, -2.0f, 2.0f);
      const int64_t first = AttentionFirstKey(/*causal=*/true, window, position);
      const int64_t last = AttentionLastKey(/*causal=*/true, position, kv_len);
      // Float64 reference over the visible keys only (j <= p and p - j < W), from the formula.
      Sequence visible{last - first + 1, {}, {}};
      for (int64_t j = 0; j <= last; ++j) {
        if (position - j >= window) continue;
        visible.k.insert(visible.k.end(), seq.k.begin() + j * kHeadDim,
                         seq.k.begin() + (j + 1) * kHeadDim);
        visible.v.insert(visible.v.end(), seq.v.begin() + j * kHeadDim,
                         seq.v.begin() + (j + 1) * kHeadDim);
      }
      ASSERT_EQ(static_cast<int64_t>(visible.k.size()), visible.kv_len * kHeadDim);
      const auto want = Reference(q.data(), visible, visible.kv_len - 1, scale);
      for (int64_t partition_size : {1, 3, 16, 33, 150}) {
        const int64_t bound = std::min(window, kv_len);
        const int64_t num_partitions = (bound + partition_size - 1) / partition_size;
        OnlineSoftmax total;
        std::vector<float> acc(kHeadDim, 0.0f);
        for (int64_t i = 0; i < num_partitions; ++i) {
          int64_t begin, end;
          PartitionKeyRange(first, last, partition_size, i, &begin, &end);
          const Partial part = AttendRange(q.data(), seq, begin, end, scale);
          MergeAttentionState(&total, acc.data(), part.state, part.acc.data(), kHeadDim);
        }
        for (int d = 0; d < kHeadDim; ++d) {
          ASSERT_NEAR(acc[d] * total.InverseSum(), want[d], 2e-6)
              << "window " << window << " position " << position << " partition_size "
              << partition_size << " d " << d;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 7 * 4 * 5);
}

TEST(AttentionSplitTest, MergingAnEmptyStateChangesNothing) {
  OnlineSoftmax total;
  std::vector<float> acc = {0.0f, 0.0f};
  const std::vector<float> poison = {NAN, NAN};
  MergeAttentionState(&total, acc.data(), OnlineSoftmax{}, poison.data(), 2);
  EXPECT_TRUE(total.Empty());
  EXPECT_EQ(total.InverseSum(), 0.0f);
  OnlineSoftmax one;
  float rescale, p;
  one.Update(0.5f, &rescale, &p);
  const std::vector<float> value = {2.0f, -1.0f};
  MergeAttentionState(&total, acc.data(), one, value.data(), 2);
  MergeAttentionState(&total, acc.data(), OnlineSoftmax{}, poison.data(), 2);
  EXPECT_FLOAT_EQ(acc[0] * total.InverseSum(), 2.0f);
  EXPECT_FLOAT_EQ(acc[1] * total.InverseSum(), -1.0f);
}

TEST(AttentionSplitTest, HeuristicSplitsOnlyFewLongSequencesAndCoversEveryKey) {
  // Many blocks already (a prefill batch): no split.
  EXPECT_EQ(
      ChooseAttentionSplit({.max_keys = 32768, .base_blocks = 8192, .num_sms = 132}).num_partitions,
      1);
  // Short sequences: no split below kMinPartitionKeys per partition.
  EXPECT_EQ(
      ChooseAttentionSplit({.max_keys = 200, .base_blocks = 8, .num_sms = 132}).num_partitions, 1);
  for (int64_t max_keys : {1, 255, 256, 257, 1000, 4096, 16384, 131072, 1 << 20}) {
    for (int64_t base : {1, 8, 32, 256, 1024}) {
      for (int32_t sms : {1, 108, 132}) {
        const AttentionSplit split = ChooseAttentionSplit(
            {.max_keys = max_keys, .base_blocks = base, .num_sms = sms, .partial_bytes = 4096});
        ASSERT_GE(split.num_partitions, 1);
        ASSERT_LE(split.num_partitions, kMaxPartitions);
        ASSERT_GE(int64_t{split.num_partitions} * split.partition_size, max_keys);
        // No partition is wholly past max_keys.
        ASSERT_LT((int64_t{split.num_partitions} - 1) * split.partition_size, max_keys);
        if (split.num_partitions > 1) {
          ASSERT_GE(split.partition_size, kMinPartitionKeys);
          ASSERT_EQ(split.partition_size % 16, 0);
          ASSERT_LE(base * split.num_partitions, 2 * kSplitBlocksPerSm * sms + base);
        }
      }
    }
  }
  // 32 decode sequences x 8 kv heads of 16k keys on 132 SMs: split into a few partitions.
  const AttentionSplit decode =
      ChooseAttentionSplit({.max_keys = 16384, .base_blocks = 256, .num_sms = 132});
  EXPECT_EQ(decode.num_partitions, 5);
  // The workspace bound caps the partitions.
  const AttentionSplit capped =
      ChooseAttentionSplit({.max_keys = 1 << 20,
                            .base_blocks = 1,
                            .num_sms = 132,
                            .partial_bytes = kMaxSplitWorkspaceBytes / 4});
  EXPECT_EQ(capped.num_partitions, 4);
}

}  // namespace
}  // namespace pagedkv
