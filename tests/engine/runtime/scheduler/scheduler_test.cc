// Copyright 2026 The pagedkv Authors.
//
// Step-by-step expectations for the Scheduler (table-driven), stop conditions, aborts, and bad
// input (each error leaves the scheduler exactly as it was).
#include "pagedkv/runtime/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "tests/engine/runtime/scheduler/scheduler_test_util.h"

namespace pagedkv {
namespace {

using testing::Describe;
using testing::ExpectBatchConsistent;
using testing::Iota;
using testing::MakeManager;

// The token every table case samples (never an EOS there).
constexpr TokenId kSampled = 999;

SchedulerRequest Req(RequestId id, std::vector<TokenId> prompt, int32_t max_new_tokens,
                     int32_t priority = 0, double arrival_time = 0.0) {
  SchedulerRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.priority = priority;
  r.arrival_time = arrival_time;
  return r;
}

struct StepExpect {
  // Describe() of each sequence, in batch order (empty string: no sequences).
  std::vector<std::string> seqs;
  std::vector<RequestId> preempted = {};
  std::vector<RequestId> finished = {};
};

struct TableCase {
  std::string name;
  SchedulerOptions options;
  int32_t num_blocks = 64;
  int32_t block_size = 4;
  // Requests added just before the given step.
  std::multimap<int, SchedulerRequest> arrivals;
  std::vector<StepExpect> steps;  // after the last one the scheduler must be idle
};

std::vector<TableCase> Cases() {
  std::vector<TableCase> cases;
  {
    TableCase c{.name = "ChunkedPrefillThenDecode"};
    c.options.max_num_batched_tokens = 8;
    c.arrivals = {{0, Req(1, Iota(20, 1), 2)}, {0, Req(2, Iota(3, 100), 2)}};
    c.steps = {
        {{"id=1 c=0 s=8 new hit=0"}},
        {{"id=1 c=8 s=8"}},
        {{"id=1 c=16 s=4 sample", "id=2 c=0 s=3 sample new hit=0"}},
        {{"id=1 c=20 s=1 sample", "id=2 c=3 s=1 sample"}},
        {{}, {}, {1, 2}},
    };
    cases.push_back(c);
  }
  {
    // A finishes and its full blocks stay cached; B shares 2 blocks; C is exactly 2 blocks but
    // only 1 may hit (one token must be computed to produce logits).
    TableCase c{.name = "PrefixHitsCountAsComputed"};
    std::vector<TokenId> b_prompt = Iota(8, 1);
    b_prompt.insert(b_prompt.end(), {50, 51, 52});
    c.arrivals = {
        {0, Req(1, Iota(10, 1), 1)}, {1, Req(2, b_prompt, 1)}, {2, Req(3, Iota(8, 1), 1)}};
    c.steps = {
        {{"id=1 c=0 s=10 sample new hit=0"}},
        {{"id=2 c=8 s=3 sample new hit=8"}, {}, {1}},
        {{"id=3 c=4 s=4 sample new hit=4"}, {}, {2}},
        {{}, {}, {3}},
    };
    cases.push_back(c);
  }
  {
    // 4 blocks of 4 tokens. At step 3 A needs a third block: B (latest) is preempted, its tail
    // block goes to A. B cannot come back until A finishes, then recomputes all 9 of its tokens
    // (its cached head block was evicted for A's fourth block at step 7).
    TableCase c{.name = "FcfsPreemptsLatestByRecompute", .num_blocks = 4};
    c.arrivals = {{0, Req(1, Iota(6, 1), 8)}, {0, Req(2, Iota(6, 100), 8)}};
    c.steps = {
        {{"id=1 c=0 s=6 sample new hit=0", "id=2 c=0 s=6 sample new hit=0"}},
        {{"id=1 c=6 s=1 sample", "id=2 c=6 s=1 sample"}},
        {{"id=1 c=7 s=1 sample", "id=2 c=7 s=1 sample"}},
        {{"id=1 c=8 s=1 sample"}, {2}},
        {{"id=1 c=9 s=1 sample"}},
        {{"id=1 c=10 s=1 sample"}},
        {{"id=1 c=11 s=1 sample"}},
        {{"id=1 c=12 s=1 sample"}},
        {{"id=2 c=0 s=9 sample new hit=0"}, {}, {1}},
        {{"id=2 c=9 s=1 sample"}},
        {{"id=2 c=10 s=1 sample"}},
        {{"id=2 c=11 s=1 sample"}},
        {{"id=2 c=12 s=1 sample"}},
        {{}, {}, {2}},
    };
    cases.push_back(c);
  }
  {
    // Priority: 2 (priority 0) is admitted after 1 (priority 5) but served first; when 2 needs a
    // block, 1 is the victim (FCFS would have preempted 2, the latest).
    TableCase c{.name = "PriorityPreemptsLowestPriority", .num_blocks = 3};
    c.options.policy = SchedulingPolicy::kPriority;
    c.arrivals = {{0, Req(1, Iota(4, 1), 6, /*priority=*/5, 0.0)},
                  {1, Req(2, Iota(4, 100), 6, /*priority=*/0, 1.0)}};
    c.steps = {
        {{"id=1 c=0 s=4 sample new hit=0"}},
        {{"id=1 c=4 s=1 sample", "id=2 c=0 s=4 sample new hit=0"}},
        {{"id=2 c=4 s=1 sample"}, {1}},  // served first; 1 preempted before its turn
        {{"id=2 c=5 s=1 sample"}},
        {{"id=2 c=6 s=1 sample"}},
        {{"id=2 c=7 s=1 sample"}},
        {{"id=2 c=8 s=1 sample"}},
        {{"id=1 c=0 s=6 sample new hit=0"}, {}, {2}},
        {{"id=1 c=6 s=1 sample"}},
        {{"id=1 c=7 s=1 sample"}},
        {{"id=1 c=8 s=1 sample"}},
        {{}, {}, {1}},
    };
    cases.push_back(c);
  }
  {
    TableCase c{.name = "PriorityOrdersWaiting"};
    c.options.policy = SchedulingPolicy::kPriority;
    c.options.max_num_batched_tokens = 4;
    c.arrivals = {{0, Req(1, Iota(4, 1), 1, /*priority=*/1, 0.0)},
                  {0, Req(2, Iota(4, 10), 1, /*priority=*/0, 1.0)},
                  {0, Req(3, Iota(4, 20), 1, /*priority=*/0, 0.5)}};
    c.steps = {
        {{"id=3 c=0 s=4 sample new hit=0"}},
        {{"id=2 c=0 s=4 sample new hit=0"}, {}, {3}},
        {{"id=1 c=0 s=4 sample new hit=0"}, {}, {2}},
        {{}, {}, {1}},
    };
    cases.push_back(c);
  }
  {
    TableCase c{.name = "FcfsIgnoresPriority"};
    c.options.max_num_batched_tokens = 4;
    c.arrivals = {{0, Req(1, Iota(4, 1), 1, /*priority=*/1, 0.0)},
                  {0, Req(2, Iota(4, 10), 1, /*priority=*/0, 1.0)}};
    c.steps = {
        {{"id=1 c=0 s=4 sample new hit=0"}},
        {{"id=2 c=0 s=4 sample new hit=0"}, {}, {1}},
        {{}, {}, {2}},
    };
    cases.push_back(c);
  }
  {
    TableCase c{.name = "LongPrefillThreshold"};
    c.options.max_num_batched_tokens = 16;
    c.options.long_prefill_token_threshold = 4;
    c.arrivals = {{0, Req(1, Iota(10, 1), 1)}, {0, Req(2, Iota(3, 100), 1)}};
    c.steps = {
        {{"id=1 c=0 s=4 new hit=0", "id=2 c=0 s=3 sample new hit=0"}},
        {{"id=1 c=4 s=4"}, {}, {2}},
        {{"id=1 c=8 s=2 sample"}},
        {{}, {}, {1}},
    };
    cases.push_back(c);
  }
  {
    TableCase c{.name = "MaxNumSeqs"};
    c.options.max_num_seqs = 2;
    c.arrivals = {
        {0, Req(1, Iota(2, 1), 2)}, {0, Req(2, Iota(2, 10), 2)}, {0, Req(3, Iota(2, 20), 2)}};
    c.steps = {
        {{"id=1 c=0 s=2 sample new hit=0", "id=2 c=0 s=2 sample new hit=0"}},
        {{"id=1 c=2 s=1 sample", "id=2 c=2 s=1 sample"}},
        {{"id=3 c=0 s=2 sample new hit=0"}, {}, {1, 2}},
        {{"id=3 c=2 s=1 sample"}},
        {{}, {}, {3}},
    };
    cases.push_back(c);
  }
  {
    // Without chunked prefill a prompt is admitted whole or not at all, and blocks the queue.
    TableCase c{.name = "NoChunkedPrefill"};
    c.options.max_num_batched_tokens = 8;
    c.options.enable_chunked_prefill = false;
    c.arrivals = {
        {0, Req(1, Iota(6, 1), 1)}, {0, Req(2, Iota(5, 10), 1)}, {0, Req(3, Iota(1, 20), 1)}};
    c.steps = {
        {{"id=1 c=0 s=6 sample new hit=0"}},
        {{"id=2 c=0 s=5 sample new hit=0", "id=3 c=0 s=1 sample new hit=0"}, {}, {1}},
        {{}, {}, {2, 3}},
    };
    cases.push_back(c);
  }
  {
    // Cache-aware order: 3 (2 cached blocks) is admitted before 2 (cold) although 2 came first.
    TableCase c{.name = "CacheAwareLongestPrefixFirst"};
    c.options.cache_aware = true;
    c.options.max_num_seqs = 1;
    std::vector<TokenId> warm = Iota(8, 1);
    warm.push_back(77);
    c.arrivals = {{0, Req(1, Iota(9, 1), 1)}, {1, Req(2, Iota(9, 100), 1)}, {1, Req(3, warm, 1)}};
    c.steps = {
        {{"id=1 c=0 s=9 sample new hit=0"}},
        {{"id=3 c=8 s=1 sample new hit=8"}, {}, {1}},
        {{"id=2 c=0 s=9 sample new hit=0"}, {}, {3}},
        {{}, {}, {2}},
    };
    cases.push_back(c);
  }
  {
    // The same arrivals without cache awareness: FCFS.
    TableCase c{.name = "WithoutCacheAwarenessFcfs"};
    c.options.max_num_seqs = 1;
    std::vector<TokenId> warm = Iota(8, 1);
    warm.push_back(77);
    c.arrivals = {{0, Req(1, Iota(9, 1), 1)}, {1, Req(2, Iota(9, 100), 1)}, {1, Req(3, warm, 1)}};
    c.steps = {
        {{"id=1 c=0 s=9 sample new hit=0"}},
        {{"id=2 c=0 s=9 sample new hit=0"}, {}, {1}},
        {{"id=3 c=8 s=1 sample new hit=8"}, {}, {2}},
        {{}, {}, {3}},
    };
    cases.push_back(c);
  }
  return cases;
}

class SchedulerTableTest : public ::testing::TestWithParam<TableCase> {};

TEST_P(SchedulerTableTest, StepByStep) {
  const TableCase& c = GetParam();
  auto manager = MakeManager(c.num_blocks, c.block_size);
  absl::StatusOr<std::unique_ptr<Scheduler>> created = Scheduler::Create(c.options, *manager);
  ASSERT_TRUE(created.ok()) << created.status();
  Scheduler& scheduler = **created;
  for (size_t step = 0; step < c.steps.size(); ++step) {
    SCOPED_TRACE(absl::StrCat(c.name, " step ", step));
    auto [begin, end] = c.arrivals.equal_range(static_cast<int>(step));
    for (auto it = begin; it != end; ++it) ASSERT_TRUE(scheduler.AddRequest(it->second).ok());

    absl::StatusOr<ScheduledBatch> batch = scheduler.Schedule();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ExpectBatchConsistent(*batch);
    const StepExpect& want = c.steps[step];
    std::vector<std::string> got;
    for (const ScheduledSequence& s : batch->sequences) got.push_back(Describe(s));
    std::vector<std::string> want_seqs = want.seqs;
    want_seqs.erase(std::remove(want_seqs.begin(), want_seqs.end(), ""), want_seqs.end());
    EXPECT_EQ(absl::StrJoin(got, " | "), absl::StrJoin(want_seqs, " | "));
    EXPECT_EQ(batch->preempted_request_ids, want.preempted);
    std::vector<RequestId> finished = batch->finished_request_ids;
    std::sort(finished.begin(), finished.end());
    EXPECT_EQ(finished, want.finished);
    ASSERT_TRUE(manager->ValidateInvariants().ok());

    std::vector<SampledToken> sampled;
    for (const ScheduledSequence& s : batch->sequences) {
      if (s.samples) sampled.push_back({s.request_id, kSampled});
    }
    ASSERT_TRUE(scheduler.UpdateFromOutput(sampled).ok());
  }
  EXPECT_FALSE(scheduler.HasUnfinishedRequests());
  EXPECT_EQ(manager->NumRequests(), 0);
  EXPECT_EQ(manager->NumAvailableBlocks(), c.num_blocks);
}

INSTANTIATE_TEST_SUITE_P(Cases, SchedulerTableTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// ---- Token ids, stop conditions, outputs
// ---------------------------------------------------------

TEST(SchedulerTest, BatchCarriesTokensPositionsAndOutputs) {
  auto manager = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner =
      Scheduler::Create(SchedulerOptions{}, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  ASSERT_TRUE(scheduler.AddRequest(Req(1, {5, 6, 7, 8, 9}, 3)).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  EXPECT_EQ(batch.token_ids, (std::vector<TokenId>{5, 6, 7, 8, 9}));
  EXPECT_EQ(batch.positions, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  ASSERT_TRUE(scheduler.UpdateFromOutput(std::vector<SampledToken>{{1, 42}}).ok());
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  EXPECT_EQ(batch.token_ids, (std::vector<TokenId>{42}));
  EXPECT_EQ(batch.positions, (std::vector<int32_t>{5}));
  auto out = scheduler.UpdateFromOutput(std::vector<SampledToken>{{1, 43}});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_FALSE((*out)[0].finished());
  EXPECT_EQ((*out)[0].num_output_tokens, 2);
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  out = scheduler.UpdateFromOutput(std::vector<SampledToken>{{1, 44}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ((*out)[0].output_tokens, (std::vector<TokenId>{42, 43, 44}));
  EXPECT_FALSE(scheduler.HasUnfinishedRequests());
  EXPECT_EQ(scheduler.stats().num_finished, 1);
}

TEST(SchedulerTest, EosAndStopTokensFinishAndAreKept) {
  auto manager = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner =
      Scheduler::Create(SchedulerOptions{}, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  SchedulerRequest a = Req(1, {1, 2}, 10);
  a.eos_token = 0;
  SchedulerRequest b = Req(2, {3, 4}, 10);
  b.stop_tokens = {7, 8};
  ASSERT_TRUE(scheduler.AddRequest(a).ok());
  ASSERT_TRUE(scheduler.AddRequest(b).ok());
  ASSERT_TRUE(scheduler.Schedule().ok());
  auto out = scheduler.UpdateFromOutput(std::vector<SampledToken>{{2, 5}, {1, 0}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].request_id, 2u);
  EXPECT_FALSE((*out)[0].finished());
  EXPECT_EQ((*out)[1].finish_reason, FinishReason::kStop);
  EXPECT_EQ((*out)[1].output_tokens, (std::vector<TokenId>{0}));
  ASSERT_TRUE(scheduler.Schedule().ok());
  out = scheduler.UpdateFromOutput(std::vector<SampledToken>{{2, 8}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ((*out)[0].output_tokens, (std::vector<TokenId>{5, 8}));
}

TEST(SchedulerTest, MaxModelLenRejectsAndStops) {
  auto manager = MakeManager(16, 4);
  SchedulerOptions options;
  options.max_model_len = 6;
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create(options, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  EXPECT_EQ(scheduler.AddRequest(Req(1, Iota(4, 1), 3)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(scheduler.AddRequest(Req(1, Iota(4, 1), 2)).ok());
}

TEST(SchedulerTest, DecodeBlocksAreCachedForLaterRequests) {
  // A's decode tokens complete its second block; B whose prompt is A's prompt + outputs hits it.
  auto manager = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner =
      Scheduler::Create(SchedulerOptions{}, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  ASSERT_TRUE(scheduler.AddRequest(Req(1, Iota(6, 1), 4)).ok());
  for (TokenId t : {7, 8, 9, 10}) {
    ASSERT_TRUE(scheduler.Schedule().ok());
    ASSERT_TRUE(scheduler.UpdateFromOutput(std::vector<SampledToken>{{1, t}}).ok());
  }
  EXPECT_FALSE(scheduler.HasUnfinishedRequests());
  std::vector<TokenId> b_prompt = Iota(10, 1);
  b_prompt.push_back(50);
  ASSERT_TRUE(scheduler.AddRequest(Req(2, b_prompt, 1)).ok());
  auto batch = scheduler.Schedule();
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->num_sequences(), 1);
  // Tokens 0..7 (two blocks) were computed by A: 6 prompt + 2 decode tokens (the last sampled
  // token, 10, was never computed, so block 2 is not cached).
  EXPECT_EQ(batch->sequences[0].num_prefix_hit_tokens, 8);
}

TEST(SchedulerTest, HeaderExampleRuns) {
  auto cache = KvCacheManager::Create({.num_blocks = 4096, .block_size = 16}).value();
  std::unique_ptr<Scheduler> scheduler_owner =
      Scheduler::Create({.max_num_batched_tokens = 2048}, *cache).value();
  Scheduler& scheduler = *scheduler_owner;
  ASSERT_TRUE(
      scheduler.AddRequest({.id = 7, .prompt = {1, 2, 3}, .max_new_tokens = 16, .eos_token = 2})
          .ok());
  ScheduledBatch batch;
  std::vector<TokenId> emitted;
  while (scheduler.HasUnfinishedRequests()) {
    ASSERT_TRUE(scheduler.Schedule(&batch).ok());
    std::vector<SampledToken> sampled;
    for (int32_t i = 0; i < batch.num_sequences(); ++i) {
      const ScheduledSequence& s = batch.sequences[static_cast<size_t>(i)];
      // A fake model: the next token is the last input token + 1.
      if (s.samples)
        sampled.push_back(
            {s.request_id,
             batch.token_ids[static_cast<size_t>(s.query_start + s.num_scheduled_tokens - 1)] + 1});
    }
    auto outputs = scheduler.UpdateFromOutput(sampled);
    ASSERT_TRUE(outputs.ok());
    for (const RequestOutput& out : *outputs) emitted.push_back(out.token);
  }
  EXPECT_EQ(emitted,
            (std::vector<TokenId>{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}));
}

TEST(SchedulerTest, EmitBlockTablesOffKeepsEverythingElse) {
  auto with_manager = MakeManager(32, 4);
  auto without_manager = MakeManager(32, 4);
  SchedulerOptions options;
  options.max_num_batched_tokens = 7;
  std::unique_ptr<Scheduler> with_owner = Scheduler::Create(options, *with_manager).value();
  Scheduler& with = *with_owner;
  options.emit_block_tables = false;
  std::unique_ptr<Scheduler> without_owner = Scheduler::Create(options, *without_manager).value();
  Scheduler& without = *without_owner;
  for (Scheduler* s : {&with, &without}) {
    ASSERT_TRUE(s->AddRequest(Req(1, Iota(9, 1), 3)).ok());
    ASSERT_TRUE(s->AddRequest(Req(2, Iota(5, 20), 4)).ok());
  }
  while (with.HasUnfinishedRequests()) {
    auto a = with.Schedule();
    auto b = without.Schedule();
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(Describe(*a), Describe(*b));
    EXPECT_EQ(a->token_ids, b->token_ids);
    EXPECT_EQ(a->positions, b->positions);
    EXPECT_EQ(a->slot_mapping, b->slot_mapping);
    EXPECT_EQ(a->query_start_loc, b->query_start_loc);
    EXPECT_TRUE(b->block_table_ids.empty());
    EXPECT_EQ(b->block_table_start, std::vector<int32_t>(b->sequences.size() + 1, 0));
    for (int32_t i = 0; i < a->num_sequences(); ++i) {
      EXPECT_EQ(a->sequences[static_cast<size_t>(i)].num_blocks,
                b->sequences[static_cast<size_t>(i)].num_blocks);
      EXPECT_TRUE(b->BlockTable(i).empty());
    }
    std::vector<SampledToken> sampled;
    for (const ScheduledSequence& s : a->sequences) {
      if (s.samples) sampled.push_back({s.request_id, 3});
    }
    ASSERT_TRUE(with.UpdateFromOutput(sampled).ok());
    ASSERT_TRUE(without.UpdateFromOutput(sampled).ok());
  }
  EXPECT_FALSE(without.HasUnfinishedRequests());
}

// ---- Aborts ------------------------------------------------------------------------------------

TEST(SchedulerTest, AbortWaitingAndRunning) {
  auto manager = MakeManager(16, 4);
  SchedulerOptions options;
  options.max_num_seqs = 1;
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create(options, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  ASSERT_TRUE(scheduler.AddRequest(Req(1, Iota(5, 1), 4)).ok());
  ASSERT_TRUE(scheduler.AddRequest(Req(2, Iota(5, 10), 4)).ok());
  ASSERT_TRUE(scheduler.Schedule().ok());  // 1 runs, 2 waits
  EXPECT_EQ(scheduler.AbortRequest(2).code(), absl::StatusCode::kOk);
  EXPECT_EQ(scheduler.num_waiting(), 0);
  // Abort between Schedule and UpdateFromOutput: its token is then not expected.
  EXPECT_TRUE(scheduler.AbortRequest(1).ok());
  EXPECT_EQ(manager->NumRequests(), 0);
  EXPECT_EQ(manager->NumAvailableBlocks(), 16);
  EXPECT_EQ(scheduler.UpdateFromOutput(std::vector<SampledToken>{{1, 3}}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(scheduler.UpdateFromOutput({}).ok());
  auto batch = scheduler.Schedule();
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE(batch->empty());
  std::vector<RequestId> finished = batch->finished_request_ids;
  std::sort(finished.begin(), finished.end());
  EXPECT_EQ(finished, (std::vector<RequestId>{1, 2}));
  EXPECT_EQ(scheduler.stats().num_aborted, 2);
  EXPECT_EQ(scheduler.AbortRequest(1).code(), absl::StatusCode::kNotFound);
  // The id is free again.
  EXPECT_TRUE(scheduler.AddRequest(Req(1, Iota(3, 1), 1)).ok());
}

// ---- Bad input leaves everything unchanged ------------------------------------------------------

// Runs `reference` and `probed` side by side; `probed` gets a bad call before each step. Their
// batches and outputs must stay identical.
class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ref_manager_ = MakeManager(8, 4, /*vocab_size=*/1000);
    probed_manager_ = MakeManager(8, 4, /*vocab_size=*/1000);
    SchedulerOptions options;
    options.max_num_batched_tokens = 8;
    ref_ = Scheduler::Create(options, *ref_manager_).value();
    probed_ = Scheduler::Create(options, *probed_manager_).value();
    for (Scheduler* s : {ref_.get(), probed_.get()}) {
      ASSERT_TRUE(s->AddRequest(Req(1, Iota(6, 1), 3)).ok());
      ASSERT_TRUE(s->AddRequest(Req(2, Iota(9, 20), 3)).ok());
    }
  }

  // Schedules both; returns the probed batch.
  ScheduledBatch ScheduleBoth() {
    auto a = ref_->Schedule();
    auto b = probed_->Schedule();
    EXPECT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(Describe(*a), Describe(*b));
    EXPECT_EQ(a->slot_mapping, b->slot_mapping);
    EXPECT_EQ(a->token_ids, b->token_ids);
    return *b;
  }
  void UpdateBoth(const std::vector<SampledToken>& sampled) {
    auto a = ref_->UpdateFromOutput(sampled);
    auto b = probed_->UpdateFromOutput(sampled);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
  }
  void ExpectSameState() {
    EXPECT_EQ(ref_->num_waiting(), probed_->num_waiting());
    EXPECT_EQ(ref_->num_running(), probed_->num_running());
    EXPECT_EQ(ref_manager_->NumAvailableBlocks(), probed_manager_->NumAvailableBlocks());
    for (RequestId id : {1, 2}) {
      auto a = ref_->GetRequestInfo(id);
      auto b = probed_->GetRequestInfo(id);
      ASSERT_EQ(a.ok(), b.ok());
      if (a.ok()) {
        EXPECT_EQ(a->num_computed_tokens, b->num_computed_tokens);
        EXPECT_EQ(a->num_output_tokens, b->num_output_tokens);
        EXPECT_EQ(a->status, b->status);
      }
    }
  }

  std::unique_ptr<KvCacheManager> ref_manager_, probed_manager_;
  std::unique_ptr<Scheduler> ref_, probed_;
};

TEST_F(BadInputTest, AddRequestErrors) {
  SchedulerRequest dup = Req(1, {1}, 1);
  EXPECT_EQ(probed_->AddRequest(dup).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(probed_->AddRequest(Req(3, {}, 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(probed_->AddRequest(Req(3, {1, -2}, 1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(probed_->AddRequest(Req(3, {1, 1000}, 1)).code(),
            absl::StatusCode::kInvalidArgument);  // outside the vocabulary
  EXPECT_EQ(probed_->AddRequest(Req(3, {1}, 0)).code(), absl::StatusCode::kInvalidArgument);
  // 8 blocks of 4 = 32 token slots: 30 + 4 - 1 = 33 tokens of KV can never fit.
  EXPECT_EQ(probed_->AddRequest(Req(3, Iota(30, 1), 4)).code(), absl::StatusCode::kInvalidArgument);
  SchedulerRequest mm = Req(3, {1, 2, 3}, 1);
  mm.multimodal = {{.offset = 0, .length = 0}};
  EXPECT_EQ(probed_->AddRequest(mm).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(probed_->AddRequest(Req(3, Iota(29, 1), 4)).ok());  // 32 tokens of KV: fits
  EXPECT_TRUE(probed_->AbortRequest(3).ok());
  ExpectSameState();
  ScheduleBoth();
}

TEST(SchedulerOptionsTest, NoChunkedPrefillRejectsWhatNeverFits) {
  auto manager = MakeManager(64, 4);
  SchedulerOptions options;
  options.enable_chunked_prefill = false;
  options.max_num_batched_tokens = 8;
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create(options, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  EXPECT_EQ(scheduler.AddRequest(Req(1, Iota(8, 1), 2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(scheduler.AddRequest(Req(1, Iota(8, 1), 1)).ok());
}

TEST_F(BadInputTest, UpdateFromOutputErrors) {
  ScheduledBatch batch = ScheduleBoth();
  // Step 0: 1 (6 tokens, samples) and 2 (2 of 9 tokens, does not sample).
  ASSERT_EQ(Describe(batch), "id=1 c=0 s=6 sample new hit=0 | id=2 c=0 s=2 new hit=0");
  using V = std::vector<SampledToken>;
  EXPECT_EQ(probed_->UpdateFromOutput(V{{1, 5}, {2, 5}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // 2 did not sample
  EXPECT_EQ(probed_->UpdateFromOutput(V{{1, 5}, {7, 5}}).status().code(),
            absl::StatusCode::kNotFound);  // unknown id
  EXPECT_EQ(probed_->UpdateFromOutput(V{{1, 5}, {1, 5}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // duplicate
  EXPECT_EQ(probed_->UpdateFromOutput(V{}).status().code(),
            absl::StatusCode::kInvalidArgument);  // missing
  EXPECT_EQ(probed_->UpdateFromOutput(V{{1, -1}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // negative token
  EXPECT_EQ(probed_->UpdateFromOutput(V{{1, 1000}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // outside the vocabulary
  // Schedule before the output is fed back.
  EXPECT_EQ(probed_->Schedule().status().code(), absl::StatusCode::kFailedPrecondition);
  ExpectSameState();
  UpdateBoth(V{{1, 5}});
  ExpectSameState();
  batch = ScheduleBoth();
  EXPECT_EQ(probed_->AbortRequest(9).code(), absl::StatusCode::kNotFound);
  ExpectSameState();
}

TEST(SchedulerOptionsTest, InvalidOptionsAreReportedNotFatal) {
  auto manager = MakeManager(8, 4);
  for (auto mutate : std::vector<void (*)(SchedulerOptions&)>{
           [](SchedulerOptions& o) { o.max_num_batched_tokens = 0; },
           [](SchedulerOptions& o) { o.max_num_seqs = 0; },
           [](SchedulerOptions& o) { o.long_prefill_token_threshold = -1; },
           [](SchedulerOptions& o) { o.cache_aware_max_waiting = 0; },
           [](SchedulerOptions& o) { o.max_model_len = -5; },
       }) {
    SchedulerOptions options;
    mutate(options);
    EXPECT_EQ(options.Validate().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Scheduler::Create(options, *manager).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(Scheduler::Create(SchedulerOptions{}, *manager).ok());
}

TEST(SchedulerTest, StatsAccumulate) {
  auto manager = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner =
      Scheduler::Create(SchedulerOptions{}, *manager).value();
  Scheduler& scheduler = *scheduler_owner;
  ASSERT_TRUE(scheduler.AddRequest(Req(1, Iota(9, 1), 1)).ok());
  auto batch = scheduler.Schedule();
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->stats.step, 0);
  EXPECT_EQ(batch->stats.num_prefill_tokens, 9);
  EXPECT_EQ(batch->stats.num_newly_admitted, 1);
  EXPECT_EQ(batch->stats.num_running, 1);
  EXPECT_EQ(batch->stats.num_used_blocks, 3);
  EXPECT_EQ(batch->stats.num_total_blocks, 16);
  ASSERT_TRUE(scheduler.UpdateFromOutput(std::vector<SampledToken>{{1, 3}}).ok());
  ASSERT_TRUE(scheduler.AddRequest(Req(2, Iota(9, 1), 1)).ok());
  batch = scheduler.Schedule();
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->stats.step, 1);
  EXPECT_EQ(batch->stats.num_prefix_hit_tokens, 8);
  EXPECT_EQ(batch->stats.num_finished, 1);
  EXPECT_EQ(scheduler.stats().num_steps, 2);
  EXPECT_EQ(scheduler.stats().num_admissions, 2);
  EXPECT_EQ(scheduler.stats().num_admitted_tokens, 18);
  EXPECT_EQ(scheduler.stats().num_prefix_hit_tokens, 8);
  EXPECT_EQ(scheduler.stats().num_scheduled_tokens, 10);
}

}  // namespace
}  // namespace pagedkv
