// Copyright 2026 The pagedkv Authors.
//
// EngineLoop over a real engine (aidreams260K from ../shared/data): live arrivals from many
// threads give the outputs a lone engine gives; aborts free the blocks; a full queue and a drain
// refuse new work.
#include "engine/serve/http/engine_loop.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/engine.h"
#include "tests/shared_data.h"

namespace pagedkv::server {
namespace {

using ::testing::HasSubstr;

class EngineLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto dir = pagedkv::testing::SharedDataDir();
    if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
    model_ = (*dir / "aidreams260K" / "aidreams260K.bin").string();
    tokenizer_ = (*dir / "aidreams260K" / "tok512.bin").string();
    long_model_ = (*dir / "tinystories656K").string();
  }
  // aidreams260K (fast, 128 positions); with `long_running`, TinyStories-656K, whose 500-token
  // requests run long enough (hundreds of steps) for a test to act while they run.
  std::unique_ptr<Engine> MakeEngine(int32_t max_num_seqs = 64, bool long_running = false) const {
    EngineOptions options;
    options.backend = BackendKind::kCpu;
    options.num_threads = 1;
    options.num_kv_blocks = 512;
    options.scheduler.max_num_seqs = max_num_seqs;
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        long_running ? Engine::Load(long_model_, "", options)
                     : Engine::Load(model_, tokenizer_, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }
  GenerationRequest Request(const Engine& engine, const std::string& text, int32_t n) const {
    GenerationRequest r;
    r.prompt_tokens = *engine.tokenizer()->Encode(text);
    r.max_new_tokens = n;
    r.stop_at_eos = false;
    return r;
  }
  // The first update with a token (or the end).
  static RequestChannel::Update FirstUpdate(RequestChannel& channel) {
    RequestChannel::Update u;
    while (u.tokens.empty() && !u.result.has_value()) u = channel.Wait(absl::Seconds(30));
    return u;
  }
  // Every token of a request until its end, after those of `seen` (an update already taken).
  static std::pair<std::vector<TokenId>, GenerationResult> Drain(RequestChannel& channel,
                                                                 RequestChannel::Update seen = {}) {
    std::vector<TokenId> tokens = seen.tokens;
    if (seen.result.has_value()) return {tokens, *seen.result};
    for (;;) {
      RequestChannel::Update u = channel.Wait(absl::Seconds(30));
      tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
      if (u.result.has_value()) return {tokens, *u.result};
    }
  }
  static int64_t UsedBlocks(EngineLoop& loop) {
    int64_t used = -1;
    EXPECT_TRUE(loop.RunOnLoop([&](Engine& e) {
                      used = e.kv_cache_manager().num_blocks() -
                             e.kv_cache_manager().NumAvailableBlocks();
                    })
                    .ok());
    return used;
  }
  std::string model_, tokenizer_, long_model_;
};

TEST_F(EngineLoopTest, LiveArrivalsFromManyThreadsGiveTheLoneEnginesOutputs) {
  const std::vector<std::string> prompts = {"Once upon a time",           "Echoes of",  "The sky",
                                            "Once upon a time there was", "A dream of", "Stars"};
  std::unique_ptr<Engine> lone = MakeEngine();
  std::vector<GenerationRequest> requests;
  for (const std::string& p : prompts) requests.push_back(Request(*lone, p, 40));
  absl::StatusOr<std::vector<GenerationResult>> expected = lone->Generate(requests);
  ASSERT_TRUE(expected.ok()) << expected.status();

  ServerMetrics metrics;
  auto loop = EngineLoop::Start(MakeEngine(), {.max_queued_requests = 64, .metrics = &metrics});
  ASSERT_TRUE(loop.ok()) << loop.status();
  std::vector<std::vector<TokenId>> got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] {
      auto channel = (*loop)->Submit(requests[i]);
      ASSERT_TRUE(channel.ok()) << channel.status();
      auto [tokens, result] = Drain(**channel);
      EXPECT_EQ(tokens, result.output_tokens);
      got[i] = tokens;
    });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i], (*expected)[i].output_tokens) << prompts[i];
  }
  EXPECT_EQ(UsedBlocks(**loop), 0);
  std::string text;
  metrics.WritePrometheus(&text);
  EXPECT_THAT(text, HasSubstr("pagedkv_requests_finished_total 6\n"));
  EXPECT_THAT(text, HasSubstr("pagedkv_time_to_first_token_seconds_count 6\n"));
}

// OpenAI's n: the samples are added in one pass, samples 1.. take the prompt's KV from sample 0,
// and each samples what it would alone.
TEST_F(EngineLoopTest, SamplesOfOnePromptAreAddedTogetherAndTakeItsKv) {
  std::unique_ptr<Engine> lone = MakeEngine();
  std::vector<GenerationRequest> samples;
  for (uint64_t i = 0; i < 4; ++i) {
    samples.push_back(Request(*lone, "Once upon a time there was a little", 24));
    samples.back().sampling = {.temperature = 0.9f, .seed = 5 + i};
  }
  std::vector<std::vector<TokenId>> expected;
  for (const GenerationRequest& s : samples) {
    absl::StatusOr<std::vector<GenerationResult>> r = MakeEngine()->Generate({s});
    ASSERT_TRUE(r.ok()) << r.status();
    expected.push_back((*r)[0].output_tokens);
  }
  auto loop = EngineLoop::Start(MakeEngine(), {.max_queued_requests = 4});
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto channels = (*loop)->SubmitSamples(samples);
  ASSERT_TRUE(channels.ok()) << channels.status();
  ASSERT_EQ(channels->size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(Drain(*(*channels)[i]).first, expected[i]) << i;
  int64_t copied = 0;
  ASSERT_TRUE((*loop)
                  ->RunOnLoop([&](Engine& e) { copied = e.scheduler().stats().num_copied_tokens; })
                  .ok());
  // The full blocks are prefix hits; the partial block's tokens but the last are copied.
  const auto prompt_len = static_cast<int64_t>(samples[0].prompt_tokens.size());
  const int64_t block = (*loop)->engine().options().block_size;
  EXPECT_EQ(copied, 3 * ((prompt_len - 1) % block));
  EXPECT_EQ(UsedBlocks(**loop), 0);
  samples.push_back(samples[0]);  // five: more than the queue takes
  EXPECT_EQ((*loop)->SubmitSamples(samples).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(EngineLoopTest, AbortEndsTheRequestAndFreesItsBlocks) {
  auto loop = EngineLoop::Start(MakeEngine(64, /*long_running=*/true), {});
  ASSERT_TRUE(loop.ok());
  auto channel = (*loop)->Submit(Request((*loop)->engine(), "Once upon a time", 500));
  ASSERT_TRUE(channel.ok()) << channel.status();
  RequestChannel::Update first = FirstUpdate(**channel);
  (*loop)->Abort((*channel)->id(), EngineLoop::AbortReason::kClientGone);
  auto [tokens, result] = Drain(**channel, first);
  EXPECT_EQ(result.finish_reason, FinishReason::kAborted);
  EXPECT_LT(tokens.size(), 500u);
  EXPECT_EQ(UsedBlocks(**loop), 0);
  (*loop)->Abort((*channel)->id(), EngineLoop::AbortReason::kClientGone);  // ended: a no-op
}

// A stream shows the prompt's logprobs before the request ends: the channel hands them out
// with the first token (as the result will hold them), and only once.
TEST_F(EngineLoopTest, PromptLogprobsComeWithTheFirstToken) {
  auto loop = EngineLoop::Start(MakeEngine(64, /*long_running=*/true), {});
  ASSERT_TRUE(loop.ok());
  GenerationRequest request = Request((*loop)->engine(), "Once upon a time, there was a", 300);
  request.sampling.prompt_logprobs = 2;
  auto channel = (*loop)->Submit(request);
  ASSERT_TRUE(channel.ok()) << channel.status();
  RequestChannel::Update first = FirstUpdate(**channel);
  ASSERT_FALSE(first.tokens.empty());
  ASSERT_TRUE(first.prompt_logprobs.has_value());
  EXPECT_EQ(first.prompt_logprobs->size(), request.prompt_tokens.size() - 1);
  bool again = false;
  GenerationResult result;
  for (RequestChannel::Update u; !u.result.has_value();) {
    u = (*channel)->Wait(absl::Seconds(30));
    again = again || u.prompt_logprobs.has_value();
    if (u.result.has_value()) result = *u.result;
  }
  EXPECT_FALSE(again);
  ASSERT_EQ(result.prompt_logprobs.size(), first.prompt_logprobs->size());
  for (size_t i = 0; i < result.prompt_logprobs.size(); ++i) {
    EXPECT_EQ(result.prompt_logprobs[i].logprob, (*first.prompt_logprobs)[i].logprob) << i;
  }
}

TEST_F(EngineLoopTest, RefusesPastTheQueueBoundAndWhatTheEngineRefuses) {
  // One sequence runs at a time, so a second request waits and a third overflows the queue.
  auto loop = EngineLoop::Start(MakeEngine(/*max_num_seqs=*/1, /*long_running=*/true),
                                {.max_queued_requests = 1});
  ASSERT_TRUE(loop.ok());
  const Engine& engine = (*loop)->engine();
  auto running = (*loop)->Submit(Request(engine, "Once upon a time", 500));
  ASSERT_TRUE(running.ok());
  const RequestChannel::Update first = FirstUpdate(**running);  // it is scheduled
  ASSERT_FALSE(first.result.has_value());
  GenerationRequest too_long = Request(engine, "Once", 1000);
  EXPECT_EQ((*loop)->Submit(too_long).status().code(), absl::StatusCode::kInvalidArgument);
  auto waiting = (*loop)->Submit(Request(engine, "Echoes of", 8));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  auto refused = (*loop)->Submit(Request(engine, "The sky", 8));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-queued-requests 1"));
  (*loop)->Abort((*running)->id(), EngineLoop::AbortReason::kClientGone);
  Drain(**running, first);
  Drain(**waiting);
  EXPECT_EQ(UsedBlocks(**loop), 0);
}

TEST_F(EngineLoopTest, DrainRefusesNewWorkAndWaitsForTheLive) {
  auto loop = EngineLoop::Start(MakeEngine(), {});
  ASSERT_TRUE(loop.ok());
  auto live = (*loop)->Submit(Request((*loop)->engine(), "Once upon a time", 30));
  ASSERT_TRUE(live.ok());
  (*loop)->BeginDrain();
  EXPECT_EQ((*loop)->Submit(Request((*loop)->engine(), "Echoes", 4)).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE((*loop)->WaitIdle(absl::Now() + absl::Seconds(60)));
  auto [tokens, result] = Drain(**live);
  EXPECT_EQ(result.finish_reason, FinishReason::kLength);
  EXPECT_EQ(tokens.size(), 30u);
}

TEST_F(EngineLoopTest, AbortAllEndsEveryLiveRequest) {
  auto loop = EngineLoop::Start(MakeEngine(), {});
  ASSERT_TRUE(loop.ok());
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const char* p : {"Once upon a time", "Echoes of", "The sky"}) {
    auto c = (*loop)->Submit(Request((*loop)->engine(), p, 100));
    ASSERT_TRUE(c.ok());
    channels.push_back(*c);
  }
  (*loop)->BeginDrain();
  (*loop)->AbortAll();
  EXPECT_TRUE((*loop)->WaitIdle(absl::Now() + absl::Seconds(60)));
  for (auto& c : channels) {
    auto [tokens, result] = Drain(*c);
    EXPECT_THAT(result.finish_reason,
                ::testing::AnyOf(FinishReason::kAborted, FinishReason::kLength));
  }
  EXPECT_EQ(UsedBlocks(**loop), 0);
}

}  // namespace
}  // namespace pagedkv::server
