// Copyright 2026 The pagedkv Authors.
//
// Speculative decoding in the Scheduler: SetDraftTokens schedules 1 + k tokens in lookahead
// slots, UpdateFromOutput keeps the accepted drafts (their slots become the request's own, their
// full blocks cached) and releases the rest.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "tests/engine/runtime/scheduler/scheduler_test_util.h"

namespace pagedkv {
namespace {

using testing::ExpectBatchConsistent;
using testing::Iota;
using testing::MakeManager;

class DraftTest : public ::testing::Test {
 protected:
  void Start(SchedulerOptions options, SchedulerRequest request, int32_t num_blocks = 32) {
    manager_ = MakeManager(num_blocks, 4, /*vocab_size=*/1000);
    scheduler_ = Scheduler::Create(options, *manager_).value();
    ASSERT_TRUE(scheduler_->AddRequest(std::move(request)).ok());
    ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());  // the prompt
    ASSERT_TRUE(scheduler_->UpdateFromOutput(std::vector<SampledToken>{{1, 42}}).ok());
  }
  std::vector<RequestOutput> Update(TokenId token, int32_t accepted) {
    auto out = scheduler_->UpdateFromOutput(std::vector<SampledToken>{{1, token, accepted}});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<RequestOutput>{};
  }

  std::unique_ptr<KvCacheManager> manager_;
  std::unique_ptr<Scheduler> scheduler_;
  ScheduledBatch batch_;
};

SchedulerRequest Req(std::vector<TokenId> prompt, int32_t max_new_tokens) {
  return SchedulerRequest{.id = 1, .prompt = std::move(prompt), .max_new_tokens = max_new_tokens};
}

TEST_F(DraftTest, DraftsAreScheduledAsOnePlusKTokens) {
  Start({}, Req(Iota(5, 0), 10));
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, std::vector<TokenId>{50, 51, 52}).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  ExpectBatchConsistent(batch_);
  EXPECT_EQ(batch_.token_ids, (std::vector<TokenId>{42, 50, 51, 52}));
  EXPECT_EQ(batch_.positions, (std::vector<int32_t>{5, 6, 7, 8}));
  ASSERT_EQ(batch_.sequences.size(), 1u);
  EXPECT_EQ(batch_.sequences[0].num_draft_tokens, 3);
  EXPECT_TRUE(batch_.sequences[0].samples);
  EXPECT_EQ(batch_.stats.num_draft_tokens, 3);
  EXPECT_EQ(batch_.stats.num_decode_tokens, 4);
  EXPECT_EQ(*manager_->NumAllocatedTokens(1), 6);
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 3);

  // Two drafts accepted, then the model's own token.
  const std::vector<RequestOutput> out = Update(60, 2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].new_tokens, (std::vector<TokenId>{50, 51, 60}));
  EXPECT_EQ(out[0].token, 60);
  EXPECT_EQ(out[0].num_output_tokens, 4);
  EXPECT_EQ(*manager_->NumAllocatedTokens(1), 8);  // 6 + the accepted drafts' slots
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 0);
  EXPECT_EQ(manager_->pool().NumCachedBlocks(), 2);  // tokens 4..7 (42, 50, 51) are full now
  EXPECT_EQ(scheduler_->stats().num_draft_tokens, 3);
  EXPECT_EQ(scheduler_->stats().num_accepted_draft_tokens, 2);

  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());  // no drafts: plain decode of 60
  ExpectBatchConsistent(batch_);
  EXPECT_EQ(batch_.token_ids, (std::vector<TokenId>{60}));
  EXPECT_EQ(batch_.positions, (std::vector<int32_t>{8}));
  EXPECT_EQ(manager_->pool().ValidateInvariants(), absl::OkStatus());
}

TEST_F(DraftTest, RejectedDraftsReleaseTheirBlocks) {
  Start({}, Req(Iota(4, 0), 20));
  const int32_t available = manager_->NumAvailableBlocks();
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, Iota(9, 100)).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  EXPECT_EQ(batch_.sequences[0].num_blocks, 4);  // 4 + 1 + 9 positions
  EXPECT_EQ(manager_->NumAvailableBlocks(), available - 3);
  Update(7, 0);
  EXPECT_EQ(manager_->GetBlockTable(1)->size(), 2u);  // 5 tokens with slots
  EXPECT_EQ(manager_->NumAvailableBlocks(), available - 1);
  EXPECT_TRUE(manager_->ValidateInvariants().ok());
}

TEST_F(DraftTest, BudgetAndLengthCapTheDrafts) {
  Start({.max_num_batched_tokens = 3}, Req(Iota(2, 0), 10));
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, Iota(6, 100)).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  EXPECT_EQ(batch_.sequences[0].num_draft_tokens, 2);  // 1 + 2 = the budget
  Update(5, 2);                                        // 4 outputs now

  // max_new_tokens 10 leaves 6 outputs: at most 5 drafts (all accepted + the bonus = 6).
  Start({}, Req(Iota(2, 0), 3));  // 1 output so far, 2 left: one draft at most
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, Iota(6, 100)).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  EXPECT_EQ(batch_.sequences[0].num_draft_tokens, 1);
  const std::vector<RequestOutput> out = Update(5, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(out[0].output_tokens, (std::vector<TokenId>{42, 100, 5}));
}

TEST_F(DraftTest, AStopTokenAmongAcceptedDraftsFinishesThere) {
  SchedulerRequest r = Req(Iota(3, 0), 10);
  r.eos_token = 51;
  Start({}, r);
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, std::vector<TokenId>{50, 51, 52}).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  const std::vector<RequestOutput> out = Update(53, 3);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(out[0].new_tokens, (std::vector<TokenId>{50, 51}));
  EXPECT_EQ(out[0].output_tokens, (std::vector<TokenId>{42, 50, 51}));
  EXPECT_FALSE(scheduler_->HasUnfinishedRequests());
  EXPECT_EQ(manager_->pool().NumUsedBlocks(), 0);
}

TEST_F(DraftTest, BadDraftCallsChangeNothing) {
  Start({}, Req(Iota(5, 0), 10));
  EXPECT_EQ(scheduler_->SetDraftTokens(9, std::vector<TokenId>{1}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler_->SetDraftTokens(1, std::vector<TokenId>{1, 1000}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_->SetDraftTokens(1, std::vector<TokenId>{-1}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, std::vector<TokenId>{50, 51}).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  // Awaiting its sample: no new drafts yet.
  EXPECT_EQ(scheduler_->SetDraftTokens(1, std::vector<TokenId>{1}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(scheduler_
                ->UpdateFromOutput(std::vector<SampledToken>{
                    {.request_id = 1, .token = 7, .num_accepted_draft_tokens = 3}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 2);
  const std::vector<RequestOutput> out = Update(7, 2);  // the right call still works
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].new_tokens, (std::vector<TokenId>{50, 51, 7}));
  // A waiting request (not admitted yet) cannot take drafts.
  ASSERT_TRUE(scheduler_->AddRequest({.id = 2, .prompt = Iota(3, 0), .max_new_tokens = 2}).ok());
  EXPECT_EQ(scheduler_->SetDraftTokens(2, std::vector<TokenId>{1}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(DraftTest, AcceptedDraftBlocksServeLaterRequests) {
  Start({}, Req(Iota(3, 0), 10));  // tokens 0 1 2 42
  ASSERT_TRUE(scheduler_->SetDraftTokens(1, std::vector<TokenId>{50, 51, 52, 53}).ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  Update(60, 4);  // 0 1 2 42 | 50 51 52 53 | 60
  ASSERT_TRUE(
      scheduler_
          ->AddRequest({.id = 2, .prompt = {0, 1, 2, 42, 50, 51, 52, 53, 9}, .max_new_tokens = 1})
          .ok());
  ASSERT_TRUE(scheduler_->Schedule(&batch_).ok());
  ASSERT_EQ(batch_.sequences.size(), 2u);
  EXPECT_EQ(batch_.sequences[1].num_prefix_hit_tokens, 8);
}

TEST(DraftPoolTest, DraftsAreDroppedRatherThanPreemptingAnyone) {
  auto manager = MakeManager(/*num_blocks=*/3, 4, /*vocab_size=*/1000);
  auto scheduler = Scheduler::Create({}, *manager).value();
  ASSERT_TRUE(scheduler->AddRequest({.id = 1, .prompt = Iota(3, 0), .max_new_tokens = 8}).ok());
  ASSERT_TRUE(scheduler->AddRequest({.id = 2, .prompt = Iota(3, 10), .max_new_tokens = 2}).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler->Schedule(&batch).ok());
  ASSERT_TRUE(scheduler->UpdateFromOutput(std::vector<SampledToken>{{1, 42}, {2, 43}}).ok());
  // Six drafts need two more blocks; one is free.
  ASSERT_TRUE(scheduler->SetDraftTokens(1, Iota(6, 100)).ok());
  ASSERT_TRUE(scheduler->Schedule(&batch).ok());
  ExpectBatchConsistent(batch);
  EXPECT_TRUE(batch.preempted_request_ids.empty());
  ASSERT_EQ(batch.sequences.size(), 2u);
  EXPECT_EQ(batch.sequences[0].num_draft_tokens, 0);
  EXPECT_EQ(batch.sequences[0].num_scheduled_tokens, 1);
  EXPECT_EQ(batch.stats.num_draft_tokens, 0);
}

}  // namespace
}  // namespace pagedkv
