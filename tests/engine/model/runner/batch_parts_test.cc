// Copyright 2026 The pagedkv Authors.
#include "engine/model/runner/batch_parts.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

// Every sequence in exactly one part, in order, tokens matching query_start_loc.
void ExpectTiling(const std::vector<BatchPart>& parts, const std::vector<int32_t>& qsl) {
  ASSERT_FALSE(parts.empty());
  EXPECT_EQ(parts.front().first_seq, 0);
  EXPECT_EQ(parts.back().end_seq, static_cast<int32_t>(qsl.size()) - 1);
  for (size_t p = 0; p < parts.size(); ++p) {
    EXPECT_LT(parts[p].first_seq, parts[p].end_seq) << "part " << p;
    EXPECT_EQ(parts[p].first_token, qsl[static_cast<size_t>(parts[p].first_seq)]) << "part " << p;
    EXPECT_EQ(parts[p].end_token, qsl[static_cast<size_t>(parts[p].end_seq)]) << "part " << p;
    if (p > 0) {
      EXPECT_EQ(parts[p].first_seq, parts[p - 1].end_seq) << "part " << p;
    }
  }
}

TEST(SplitBatchTest, EqualDecodeTokensSplitEvenly) {
  const std::vector<int32_t> qsl = {0, 1, 2, 3, 4, 5, 6, 7, 8}, lens(8, 40);
  const std::vector<BatchPart> parts = SplitBatch(qsl, lens, 2, {.per_token = 100, .per_key = 8});
  ExpectTiling(parts, qsl);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], (BatchPart{.first_seq = 0, .end_seq = 4, .first_token = 0, .end_token = 4}));
  EXPECT_EQ(parts[1], (BatchPart{.first_seq = 4, .end_seq = 8, .first_token = 4, .end_token = 8}));
}

TEST(SplitBatchTest, APrefillChunkWeighsItsTokensAndCausalKeys) {
  // Sequence 0: a 12-token prefill chunk ending at kv_len 12 (12 tokens, 78 keys); then six decode
  // tokens at kv_len 13 (13 keys each). Per token 10, per key 1: 198 against 6 * 23 = 138.
  const std::vector<int32_t> qsl = {0, 12, 13, 14, 15, 16, 17, 18};
  const std::vector<int32_t> lens = {12, 13, 13, 13, 13, 13, 13};
  const std::vector<BatchPart> parts = SplitBatch(qsl, lens, 2, {.per_token = 10, .per_key = 1});
  ExpectTiling(parts, qsl);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].end_seq, 1);  // the chunk alone outweighs half the batch
}

TEST(SplitBatchTest, ACutFallsAtTheBoundaryNearestTheGoal) {
  // 14 tokens then 24: the cut after the first sequence (14 of 38) is nearer half than none.
  const std::vector<int32_t> qsl = {0, 14, 38}, lens = {14, 24};
  const std::vector<BatchPart> parts = SplitBatch(qsl, lens, 2, {});
  ExpectTiling(parts, qsl);
  EXPECT_EQ(parts.size(), 2u);
}

TEST(SplitBatchTest, NeverMorePartsThanSequencesOrThanAsked) {
  const std::vector<int32_t> qsl = {0, 5, 9}, lens = {5, 4};
  EXPECT_EQ(SplitBatch(qsl, lens, 8, {}).size(), 2u);
  EXPECT_EQ(SplitBatch(qsl, lens, 1, {}).size(), 1u);
  const std::vector<int32_t> qsl8 = {0, 1, 2, 3, 4, 5, 6, 7, 8}, lens8(8, 1);
  const std::vector<BatchPart> three = SplitBatch(qsl8, lens8, 3, {});
  ExpectTiling(three, qsl8);
  EXPECT_EQ(three.size(), 3u);
}

TEST(SplitBatchTest, SequencesWithoutTokensNeverMakeAnEmptyPart) {
  // Sequences 0, 2 and 4 have no tokens this step.
  const std::vector<int32_t> qsl = {0, 0, 3, 3, 6, 6}, lens = {2, 3, 4, 3, 9};
  const std::vector<BatchPart> parts = SplitBatch(qsl, lens, 4, {});
  ExpectTiling(parts, qsl);
  ASSERT_EQ(parts.size(), 2u);
  for (const BatchPart& part : parts) EXPECT_GT(part.end_token, part.first_token);
}

TEST(SplitBatchTest, AnEmptyBatchIsOnePart) {
  const std::vector<int32_t> qsl = {0, 0, 0}, lens = {1, 1};
  const std::vector<BatchPart> parts = SplitBatch(qsl, lens, 2, {});
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0], (BatchPart{.first_seq = 0, .end_seq = 2, .first_token = 0, .end_token = 0}));
}

}  // namespace
}  // namespace pagedkv
