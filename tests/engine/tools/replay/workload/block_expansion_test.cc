// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/block_expansion.h"

#include <random>

#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

ReplayRequest TraceRequest(std::vector<uint64_t> ids, int64_t input_length, int32_t tbs) {
  ReplayRequest r;
  r.input_length = input_length;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t len = i + 1 < ids.size() ? tbs : input_length - static_cast<int64_t>(i) * tbs;
    r.segments.push_back({.content_id = ids[i], .length = static_cast<int32_t>(len)});
  }
  return r;
}

TEST(BlockExpansionTest, EqualTracePrefixesStayEqualAtEveryBlockSize) {
  Workload w;
  w.trace_block_size = 512;
  w.requests.push_back(TraceRequest({1, 2, 3, 4}, 2048, 512));
  w.requests.push_back(TraceRequest({1, 2, 3, 9}, 2048, 512));
  w.requests.push_back(TraceRequest({7, 2, 3, 4}, 2048, 512));
  for (int32_t bs : {16, 64, 100, 512, 1024}) {
    auto e = ExpandWorkload(w, {.block_size = bs});
    ASSERT_TRUE(e.ok()) << e.status();
    auto a = e->RequestKeys(0), b = e->RequestKeys(1), c = e->RequestKeys(2);
    ASSERT_EQ(a.size(), static_cast<size_t>(2048 / bs)) << bs;
    const size_t shared = static_cast<size_t>(3 * 512 / bs);  // blocks inside the 3 shared ids
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i] == b[i], i < shared) << "block size " << bs << " block " << i;
      // A different first hash id changes every later block, even where ids agree again.
      EXPECT_NE(a[i], c[i]) << "block size " << bs << " block " << i;
    }
  }
}

TEST(BlockExpansionTest, TraceBlockSizeGivesOneBlockPerFullHashIdByDefault) {
  Workload w;
  w.trace_block_size = 512;
  w.requests.push_back(TraceRequest({5, 6, 7}, 1100, 512));
  auto e = ExpandWorkload(w, {.block_size = 512});
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->one_block_per_hash_id);
  EXPECT_TRUE(e->engine_rules);
  ASSERT_EQ(e->num_blocks(), 2);
  EXPECT_EQ(e->last_block_tokens[0], 512);
  EXPECT_EQ(e->partial_tokens, 76);
  auto old = ExpandWorkload(w, {.block_size = 512, .cache_partial_tail = true});
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->engine_rules);
  EXPECT_EQ(old->keys[1], e->keys[1]);
}

TEST(BlockExpansionTest, CachePartialTailGivesOneBlockPerHashIdIncludingTheLast) {
  Workload w;
  w.trace_block_size = 512;
  w.requests.push_back(TraceRequest({5, 6, 7}, 1100, 512));
  auto e = ExpandWorkload(w, {.block_size = 512, .cache_partial_tail = true});
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->one_block_per_hash_id);
  ASSERT_EQ(e->num_blocks(), 3);
  Workload other = w;
  other.requests[0] = TraceRequest({5, 6, 8}, 1100, 512);
  auto f = ExpandWorkload(other, {.block_size = 512, .cache_partial_tail = true});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(e->keys[1], f->keys[1]);
  EXPECT_NE(e->keys[2], f->keys[2]);
  EXPECT_EQ(e->last_block_tokens[0], 76);
  EXPECT_EQ(e->BlockTokens(0, 0), 512);
  EXPECT_EQ(e->BlockTokens(0, 2), 76);
  EXPECT_EQ(e->partial_tokens, 0);

  auto small = ExpandWorkload(w, {.block_size = 16});
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->one_block_per_hash_id);
  EXPECT_EQ(small->num_blocks(), 1100 / 16);
  EXPECT_EQ(small->partial_tokens, 1100 % 16);
}

// Brute force: two blocks have equal keys exactly when they sit at the same index and all tokens
// up to the end of the block are equal.
TEST(BlockExpansionTest, KeysEqualExactlyWhenTokenPrefixesAreEqual) {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20; ++round) {
    Workload w;
    // Few contents and short segments so prefixes often agree and segments straddle blocks.
    for (int r = 0; r < 12; ++r) {
      ReplayRequest req;
      const int segs = 1 + static_cast<int>(rng() % 5);
      for (int s = 0; s < segs; ++s) {
        const int32_t len = 1 + static_cast<int32_t>(rng() % 20);
        req.segments.push_back({.content_id = rng() % 3, .length = len});
        req.input_length += len;
      }
      w.requests.push_back(req);
    }
    const int32_t bs = 1 + static_cast<int32_t>(rng() % 12);
    auto e = ExpandWorkload(w, {.block_size = bs});
    ASSERT_TRUE(e.ok()) << e.status();
    std::vector<std::vector<TokenId>> tokens;
    for (const ReplayRequest& r : w.requests) tokens.push_back(MaterializePrompt(r, 1 << 30));
    for (size_t x = 0; x < w.requests.size(); ++x) {
      for (size_t y = 0; y < w.requests.size(); ++y) {
        auto kx = e->RequestKeys(x), ky = e->RequestKeys(y);
        ASSERT_EQ(kx.size(), tokens[x].size() / bs);
        for (size_t i = 0; i < kx.size(); ++i) {
          for (size_t j = 0; j < ky.size(); ++j) {
            const size_t end = (i + 1) * bs;
            const bool same =
                i == j && std::equal(tokens[x].begin(), tokens[x].begin() + end, tokens[y].begin());
            ASSERT_EQ(kx[i] == ky[j], same) << "round " << round << " bs " << bs;
          }
        }
      }
    }
  }
}

TEST(BlockExpansionTest, SeenBeforeAndNextUseMatchBruteForce) {
  auto w = MakeBuiltinWorkload("mixed", {.num_requests = 120, .seed = 3});
  ASSERT_TRUE(w.ok());
  auto e = ExpandWorkload(*w, {.block_size = 32});
  ASSERT_TRUE(e.ok());
  for (size_t r = 0; r < e->num_requests(); ++r) {
    for (int64_t i = e->request_begin[r]; i < e->request_begin[r + 1]; ++i) {
      bool seen = false;
      for (int64_t j = 0; j < e->request_begin[r] && !seen; ++j) seen = e->keys[j] == e->keys[i];
      EXPECT_EQ(e->seen_before[i] != 0, seen);
      int32_t next = kNeverUsed;
      for (int64_t j = e->request_begin[r + 1]; j < e->num_blocks() && next == kNeverUsed; ++j) {
        if (e->keys[j] == e->keys[i]) {
          next = static_cast<int32_t>(
              std::upper_bound(e->request_begin.begin(), e->request_begin.end(), j) -
              e->request_begin.begin() - 1);
        }
      }
      EXPECT_EQ(e->next_use[i], next);
    }
  }
}

TEST(BlockExpansionTest, RejectsBadBlockSizeAndInvalidWorkloads) {
  Workload w;
  w.requests.push_back(TraceRequest({1}, 10, 512));
  EXPECT_FALSE(ExpandWorkload(w, {.block_size = 0}).ok());
  w.requests[0].input_length = 11;  // segments cover 10 tokens
  auto e = ExpandWorkload(w, {.block_size = 16});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv::replay

namespace pagedkv::replay {
namespace {

// Trace requests whose hash ids form a random prefix tree, partial last ids included.
Workload RandomTrace(uint64_t seed, int32_t tbs, int requests) {
  std::mt19937_64 rng(seed);
  Workload w;
  w.trace_block_size = tbs;
  std::vector<std::vector<uint64_t>> prompts;
  uint64_t next_id = 0;
  for (int i = 0; i < requests; ++i) {
    std::vector<uint64_t> ids;
    if (!prompts.empty() && rng() % 4 != 0) {
      const auto& base = prompts[rng() % prompts.size()];
      ids.assign(base.begin(), base.begin() + static_cast<int64_t>(rng() % (base.size() + 1)));
    }
    const int extra = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < extra; ++k) ids.push_back(next_id++ % 97);  // ids repeat across trees
    prompts.push_back(ids);
    const int64_t tail = 1 + static_cast<int64_t>(rng() % tbs);
    w.requests.push_back(TraceRequest(ids, static_cast<int64_t>(ids.size() - 1) * tbs + tail, tbs));
  }
  return w;
}

// The hash-id-prefix pass (no next uses wanted) gives the same seen_before and distinct count as
// numbering every key (what compute_next_use does), in both block models.
TEST(BlockExpansionTest, SeenBeforeByHashIdPrefixEqualsNumberingEveryKey) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Workload w = RandomTrace(seed, 16, 200);
    for (int32_t bs : {1, 2, 4, 8, 16, 3, 32}) {
      for (bool partial_tail : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "seed " << seed << " bs " << bs << " partial tail " << partial_tail);
        auto fast = ExpandWorkload(
            w, {.block_size = bs, .compute_next_use = false, .cache_partial_tail = partial_tail});
        auto dense = ExpandWorkload(
            w, {.block_size = bs, .compute_next_use = true, .cache_partial_tail = partial_tail});
        ASSERT_TRUE(fast.ok() && dense.ok());
        EXPECT_EQ(fast->keys, dense->keys);
        EXPECT_EQ(fast->seen_before, dense->seen_before);
        EXPECT_EQ(fast->distinct_blocks, dense->distinct_blocks);
      }
    }
  }
}

// The streamed expansion writes what ExpandWorkload gives, and a replay that starts while it is
// still being written counts what a replay of the whole expansion counts.
TEST(BlockExpansionTest, StreamedExpansionEqualsExpandWorkloadAndReplaysTheSame) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Workload w = RandomTrace(seed, 16, 300);
    for (int32_t bs : {4, 16}) {
      for (bool partial_tail : {false, true}) {
        const ExpansionOptions options{
            .block_size = bs, .compute_next_use = false, .cache_partial_tail = partial_tail};
        SCOPED_TRACE(testing::Message()
                     << "seed " << seed << " bs " << bs << " partial tail " << partial_tail);
        if (bs == 16 && partial_tail) {
          EXPECT_FALSE(StreamedExpansion::Streamable(w, options));
          EXPECT_FALSE(StreamedExpansion::Start(w, options).ok());
          continue;
        }
        auto whole = ExpandWorkload(w, options);
        auto streamed = StreamedExpansion::Start(w, options);
        ASSERT_TRUE(whole.ok() && streamed.ok());
        auto during = RunCacheReplay((*streamed)->expanded(),
                                     {.capacity_blocks = 40,
                                      .policy = "lru",
                                      .requests_ready = &(*streamed)->requests_ready()});
        (*streamed)->Finish();
        const ExpandedWorkload& e = (*streamed)->expanded();
        EXPECT_EQ(e.keys, whole->keys);
        EXPECT_EQ(e.seen_before, whole->seen_before);
        EXPECT_EQ(e.request_begin, whole->request_begin);
        EXPECT_EQ(e.last_block_tokens, whole->last_block_tokens);
        EXPECT_EQ(e.distinct_blocks, whole->distinct_blocks);
        EXPECT_EQ(e.total_tokens, whole->total_tokens);
        EXPECT_EQ(e.partial_tokens, whole->partial_tokens);
        EXPECT_EQ(e.engine_rules, whole->engine_rules);
        auto after = RunCacheReplay(*whole, {.capacity_blocks = 40, .policy = "lru"});
        ASSERT_TRUE(during.ok() && after.ok());
        EXPECT_EQ(during->hit_blocks, after->hit_blocks);
        EXPECT_EQ(during->hit_tokens, after->hit_tokens);
        EXPECT_EQ(during->evictions, after->evictions);
        EXPECT_EQ(during->miss_never_seen, after->miss_never_seen);
      }
    }
  }
}

}  // namespace
}  // namespace pagedkv::replay
