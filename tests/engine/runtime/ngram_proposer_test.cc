// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/ngram_proposer.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv::internal {
namespace {

TEST(NgramProposerTest, ProposesWhatFollowedTheLatestMatch) {
  // ... 1 2 3 [7 8] ... 1 2 3 [9 9 9] ... 1 2 3 -> the latest earlier "1 2 3" is followed by 9s.
  const std::vector<TokenId> context = {1, 2, 3, 7, 8, 5, 1, 2, 3, 9, 9, 9, 4, 1, 2, 3};
  EXPECT_EQ(ProposeNgramDrafts(context, {.num_draft_tokens = 2, .min_ngram = 1, .max_ngram = 3}),
            (std::vector<TokenId>{9, 9}));
  // Fewer than k when every match is near the end; the proposal may run into the suffix itself.
  const std::vector<TokenId> loop = {5, 6, 5, 6};
  EXPECT_EQ(ProposeNgramDrafts(loop, {.num_draft_tokens = 8, .min_ngram = 1, .max_ngram = 2}),
            (std::vector<TokenId>{5, 6}));
  // In a run, the latest match with k tokens after it, not the one just before the suffix.
  const std::vector<TokenId> run = {3, 7, 7, 7, 7, 7, 7};
  EXPECT_EQ(ProposeNgramDrafts(run, {.num_draft_tokens = 3, .min_ngram = 2, .max_ngram = 2}),
            (std::vector<TokenId>{7, 7, 7}));
  // No match has k tokens after it: the earliest one, whose continuation is longest.
  const std::vector<TokenId> near_end = {1, 2, 8, 9, 1, 2, 4, 1, 2};
  EXPECT_EQ(ProposeNgramDrafts(near_end, {.num_draft_tokens = 6, .min_ngram = 2, .max_ngram = 2}),
            (std::vector<TokenId>{8, 9, 1, 2, 4, 1}));
  // The longest n-gram wins over a later shorter match.
  const std::vector<TokenId> longest = {4, 5, 6, 1, 9, 5, 6, 2, 4, 5, 6};
  EXPECT_EQ(ProposeNgramDrafts(longest, {.num_draft_tokens = 1, .min_ngram = 1, .max_ngram = 3}),
            (std::vector<TokenId>{1}));
  EXPECT_EQ(ProposeNgramDrafts(longest, {.num_draft_tokens = 1, .min_ngram = 1, .max_ngram = 2}),
            (std::vector<TokenId>{2}));
  // No earlier occurrence, too short a context, or nothing to search: no drafts.
  EXPECT_TRUE(ProposeNgramDrafts(std::vector<TokenId>{1, 2, 3}, {}).empty());
  EXPECT_TRUE(ProposeNgramDrafts(std::vector<TokenId>{1}, {}).empty());
  EXPECT_TRUE(ProposeNgramDrafts(std::vector<TokenId>{}, {}).empty());
}

// Brute force: every (n, start) pair in the documented preference order.
std::vector<TokenId> Reference(const std::vector<TokenId>& c, int k, int min_n, int max_n) {
  const int len = static_cast<int>(c.size());
  for (int n = max_n; n >= min_n; --n) {
    std::vector<int> starts;  // every match, latest first
    for (int start = len - n - 1; start >= 0; --start) {
      bool same = true;
      for (int j = 0; j < n; ++j) same = same && c[start + j] == c[len - n + j];
      if (same) starts.push_back(start);
    }
    if (starts.empty()) continue;
    int pick = starts.back();  // the earliest
    for (int start : starts) {
      if (len - (start + n) >= k) {
        pick = start;
        break;
      }
    }
    std::vector<TokenId> out;
    for (int j = pick + n; j < len && static_cast<int>(out.size()) < k; ++j) out.push_back(c[j]);
    return out;
  }
  return {};
}

TEST(NgramProposerTest, MatchesABruteForceReference) {
  std::mt19937 rng(5);
  int proposed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<TokenId> c(rng() % 40);
    const TokenId vocab = 2 + static_cast<TokenId>(rng() % 6);
    for (TokenId& t : c) t = static_cast<TokenId>(rng() % vocab);
    const int k = 1 + static_cast<int>(rng() % 6);
    const int min_n = 1 + static_cast<int>(rng() % 3);
    const int max_n = min_n + static_cast<int>(rng() % 3);
    const std::vector<TokenId> got =
        ProposeNgramDrafts(c, {.num_draft_tokens = k, .min_ngram = min_n, .max_ngram = max_n});
    ASSERT_EQ(got, Reference(c, k, min_n, max_n)) << "trial " << trial;
    proposed += !got.empty();
  }
  EXPECT_GT(proposed, 1000);
}

TEST(NgramProposerTest, AcceptsTheLongestMatchingPrefix) {
  const std::vector<TokenId> drafts = {4, 5, 6};
  EXPECT_EQ(NumAcceptedDrafts(drafts, std::vector<TokenId>{4, 5, 6, 7}), 3);
  EXPECT_EQ(NumAcceptedDrafts(drafts, std::vector<TokenId>{4, 5, 1, 7}), 2);
  EXPECT_EQ(NumAcceptedDrafts(drafts, std::vector<TokenId>{1, 5, 6, 7}), 0);
  EXPECT_EQ(NumAcceptedDrafts({}, std::vector<TokenId>{3}), 0);
}

}  // namespace
}  // namespace pagedkv::internal
