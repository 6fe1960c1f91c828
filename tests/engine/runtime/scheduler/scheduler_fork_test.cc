// Copyright 2026 The pagedkv Authors.
//
// Prompt sources (SchedulerRequest::prompt_source): the samples of one prompt wait for the source
// to compute it, then share its full blocks through the prefix cache, get its partial last block
// copied (batch.block_copies) and compute only the last prompt token; a source that is gone, has
// another prompt or cannot be copied from changes nothing.
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "tests/engine/runtime/scheduler/scheduler_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::Describe;
using ::pagedkv::testing::ExpectBatchConsistent;
using ::pagedkv::testing::Iota;
using ::pagedkv::testing::MakeManager;

SchedulerRequest Sample(RequestId id, std::vector<TokenId> prompt, RequestId source) {
  SchedulerRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = 3;
  r.prompt_source = source;
  return r;
}

std::vector<BlockId> Table(const KvCacheManager& cache, RequestId id) {
  const std::span<const BlockId> t = cache.GetBlockTable(id).value();
  return {t.begin(), t.end()};
}

struct ForkFixture {
  explicit ForkFixture(KvCacheManagerOptions options = {.num_blocks = 32, .block_size = 4}) {
    options.model_fingerprint = "fork-test";
    cache = KvCacheManager::Create(options).value();
    scheduler = Scheduler::Create(SchedulerOptions{}, *cache).value();
  }
  ScheduledBatch Step() {
    ScheduledBatch batch;
    EXPECT_TRUE(scheduler->Schedule(&batch).ok());
    ExpectBatchConsistent(batch);
    return batch;
  }
  // Feeds token 50 to every sampling sequence of `batch`.
  void Sampled(const ScheduledBatch& batch) {
    std::vector<SampledToken> tokens;
    for (const ScheduledSequence& s : batch.sequences) {
      if (s.samples) tokens.push_back({s.request_id, 50});
    }
    EXPECT_TRUE(scheduler->UpdateFromOutput(tokens).ok());
  }
  std::unique_ptr<KvCacheManager> cache;
  std::unique_ptr<Scheduler> scheduler;
};

TEST(SchedulerForkTest, SamplesWaitThenShareFullBlocksAndCopyThePartialOne) {
  ForkFixture f;
  const std::vector<TokenId> prompt = Iota(10, 1);  // two full blocks of 4 and 2 tokens
  for (RequestId id : {1, 2, 3}) {
    ASSERT_TRUE(f.scheduler->AddRequest(Sample(id, prompt, id == 1 ? 0 : 1)).ok());
  }
  ScheduledBatch batch = f.Step();
  EXPECT_EQ(Describe(batch), "id=1 c=0 s=10 sample new hit=0");
  EXPECT_EQ(f.scheduler->num_waiting(), 2);
  EXPECT_TRUE(batch.block_copies.empty());
  f.Sampled(batch);

  batch = f.Step();
  EXPECT_EQ(Describe(batch),
            "id=1 c=10 s=1 sample | id=2 c=9 s=1 sample new hit=8 | id=3 c=9 s=1 sample new hit=8");
  const std::vector<BlockId> source = Table(*f.cache, 1);
  ASSERT_EQ(batch.block_copies.size(), 2u);
  for (RequestId id : {2, 3}) {
    const std::vector<BlockId> table = Table(*f.cache, id);
    ASSERT_EQ(table.size(), 3u);
    EXPECT_EQ(table[0], source[0]);  // full blocks: shared
    EXPECT_EQ(table[1], source[1]);
    EXPECT_NE(table[2], source[2]);  // the partial one: its own, copied from the source's
    const BlockCopy& copy = batch.block_copies[id - 2];
    EXPECT_EQ(copy.src, source[2]);
    EXPECT_EQ(copy.dst, table[2]);
    EXPECT_EQ(batch.sequences[id - 1].num_copied_tokens, 1);
  }
  EXPECT_EQ(batch.token_ids,
            (std::vector<TokenId>{50, 10, 10}));  // each sample's last prompt token
  EXPECT_EQ(batch.stats.num_copied_tokens, 2);
  EXPECT_EQ(f.scheduler->stats().num_copied_tokens, 2);
  f.Sampled(batch);
  while (f.scheduler->HasUnfinishedRequests()) f.Sampled(f.Step());
  EXPECT_TRUE(f.cache->ValidateInvariants().ok());
}

TEST(SchedulerForkTest, APromptOfWholeBlocksCopiesItsLastBlock) {
  ForkFixture f;
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(1, Iota(8, 1), 0)).ok());
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(2, Iota(8, 1), 1)).ok());
  f.Sampled(f.Step());
  const ScheduledBatch batch = f.Step();
  // The hit stops before the last token, so block 1 is copied (tokens 4..6) and token 7 computed.
  EXPECT_EQ(Describe(batch), "id=1 c=8 s=1 sample | id=2 c=7 s=1 sample new hit=4");
  ASSERT_EQ(batch.block_copies.size(), 1u);
  EXPECT_EQ(batch.block_copies[0].src, Table(*f.cache, 1)[1]);
  EXPECT_EQ(batch.block_copies[0].dst, Table(*f.cache, 2)[1]);
  EXPECT_EQ(batch.sequences[1].num_copied_tokens, 3);
}

TEST(SchedulerForkTest, WithoutPrefixCachingEveryBlockIsCopied) {
  ForkFixture f({.num_blocks = 32, .block_size = 4, .enable_prefix_caching = false});
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(1, Iota(10, 1), 0)).ok());
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(2, Iota(10, 1), 1)).ok());
  f.Sampled(f.Step());
  const ScheduledBatch batch = f.Step();
  EXPECT_EQ(Describe(batch), "id=1 c=10 s=1 sample | id=2 c=9 s=1 sample new hit=0");
  const std::vector<BlockId> source = Table(*f.cache, 1);
  const std::vector<BlockId> table = Table(*f.cache, 2);
  ASSERT_EQ(batch.block_copies.size(), 3u);
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(batch.block_copies[j].src, source[j]);
    EXPECT_EQ(batch.block_copies[j].dst, table[j]);
    EXPECT_NE(table[j], source[j]);
  }
}

TEST(SchedulerForkTest, AFinishedSourceLeavesThePromptToThePrefixCache) {
  ForkFixture f;
  SchedulerRequest source = Sample(1, Iota(10, 1), 0);
  source.max_new_tokens = 1;  // finishes with its first token
  ASSERT_TRUE(f.scheduler->AddRequest(source).ok());
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(2, Iota(10, 1), 1)).ok());
  f.Sampled(f.Step());
  const ScheduledBatch batch = f.Step();
  EXPECT_EQ(Describe(batch), "id=2 c=8 s=2 sample new hit=8");
  EXPECT_TRUE(batch.block_copies.empty());
}

TEST(SchedulerForkTest, AnAbortedSourceLetsTheSampleRunAlone) {
  ForkFixture f;
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(1, Iota(10, 1), 0)).ok());
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(2, Iota(10, 1), 1)).ok());
  const ScheduledBatch first = f.Step();
  f.Sampled(first);
  ASSERT_TRUE(f.scheduler->AbortRequest(1).ok());
  const ScheduledBatch batch = f.Step();
  EXPECT_EQ(Describe(batch), "id=2 c=8 s=2 sample new hit=8");  // its full blocks stay cached
  EXPECT_TRUE(batch.block_copies.empty());
}

TEST(SchedulerForkTest, ASourceOfAnotherPromptOrAnUnknownOneIsIgnored) {
  ForkFixture f;
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(1, Iota(10, 1), 0)).ok());
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(2, Iota(10, 2), 1)).ok());   // another prompt
  ASSERT_TRUE(f.scheduler->AddRequest(Sample(3, Iota(10, 1), 99)).ok());  // no such request
  SchedulerRequest salted = Sample(4, Iota(10, 1), 1);
  salted.cache_salt = "other tenant";
  ASSERT_TRUE(f.scheduler->AddRequest(salted).ok());
  SchedulerRequest logprobs = Sample(5, Iota(10, 1), 1);
  logprobs.skip_prefix_cache_lookup = true;  // needs every prompt position computed
  ASSERT_TRUE(f.scheduler->AddRequest(logprobs).ok());
  const ScheduledBatch batch = f.Step();
  EXPECT_EQ(Describe(batch),
            "id=1 c=0 s=10 sample new hit=0 | id=2 c=0 s=10 sample new hit=0 | "
            "id=3 c=8 s=2 sample new hit=8 | id=4 c=0 s=10 sample new hit=0 | "
            "id=5 c=0 s=10 sample new hit=0");
  EXPECT_TRUE(batch.block_copies.empty());
}

}  // namespace
}  // namespace pagedkv
