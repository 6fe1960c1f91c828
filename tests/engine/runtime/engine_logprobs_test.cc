// Copyright 2026 The pagedkv Authors.
//
// Logprobs of generated tokens (SamplingOptions::logprobs): TokenLogprobsOf against a float64
// log-softmax, and the engine's values against the float64 reference forward of a tiny model.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime/token_logprobs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/engine/model/tiny_weights.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::LoadTinyWeights;
using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::ReferenceForward;
using ::pagedkv::testing::TinyLlama2c;
using ::pagedkv::testing::UntiedShape;
using ::testing::HasSubstr;

std::vector<double> LogSoftmax(const std::vector<double>& row) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (const double x : row) sum += std::exp(x - max);
  std::vector<double> out(row.size());
  for (size_t i = 0; i < row.size(); ++i) out[i] = row[i] - max - std::log(sum);
  return out;
}

TEST(TokenLogprobsOfTest, MatchesAFloat64LogSoftmaxAndSortsTheTop) {
  const std::vector<float> row = {1.5f, -2.0f, 3.25f, 3.25f, 0.0f, 90.0f, -1e30f};
  std::vector<double> wide(row.begin(), row.end());
  const std::vector<double> want = LogSoftmax(wide);
  const TokenLogprobs lp = TokenLogprobsOf(row, /*token=*/2, /*top_k=*/4);
  EXPECT_NEAR(lp.logprob, want[2], 1e-5);
  EXPECT_EQ(lp.rank, 2);  // below 90 only; the tie at 3.25 does not count
  EXPECT_EQ(TokenLogprobsOf(row, 6, 0).rank, 7);
  ASSERT_EQ(lp.top.size(), 4u);
  const TokenId order[] = {5, 2, 3, 0};  // 3.25 twice: the lower id first
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(lp.top[i].token, order[i]) << i;
    EXPECT_NEAR(lp.top[i].logprob, want[static_cast<size_t>(order[i])], 1e-5) << i;
  }
  EXPECT_TRUE(TokenLogprobsOf(row, 0, 0).top.empty());
  EXPECT_EQ(TokenLogprobsOf(row, 0, 20).top.size(), row.size());  // at most the vocabulary
}

TEST(TokenLogprobsOfTest, ANanOrInfiniteLogitGivesNan) {
  for (const float bad : {std::nanf(""), INFINITY}) {
    const std::vector<float> row = {0.0f, bad, 1.0f};
    EXPECT_TRUE(std::isnan(TokenLogprobsOf(row, 0, 2).logprob));
  }
}

class EngineLogprobsTest : public ::testing::Test {
 protected:
  EngineLogprobsTest()
      : model_(MakeTinyLlama2c(UntiedShape(64), 57)),
        weights_(LoadTinyWeights(model_, "logprobs_model.bin")) {}
  std::unique_ptr<Engine> MakeEngine() {
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(
        weights_, {.backend = BackendKind::kCpu, .block_size = 4, .num_kv_blocks = 128});
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(e).value();
  }
  static GenerationRequest Request(std::vector<TokenId> prompt, SamplingOptions sampling) {
    GenerationRequest r;
    r.prompt_tokens = std::move(prompt);
    r.max_new_tokens = 12;
    r.stop_at_eos = false;
    r.sampling = sampling;
    return r;
  }

  TinyLlama2c model_;
  std::shared_ptr<const ModelWeights> weights_;
};

// Every token of a request that asked for logprobs carries log_softmax(raw logits) of its row,
// whatever the temperature, in a batch with a request that did not ask.
TEST_F(EngineLogprobsTest, GeneratedTokensCarryTheReferenceLogprobs) {
  auto engine = MakeEngine();
  const std::vector<std::vector<TokenId>> prompts = {{1, 7, 9, 30, 4, 12}, {1, 5, 5, 40}, {1, 8}};
  const SamplingOptions sampling[] = {
      {.logprobs = 5}, {.temperature = 0.9f, .seed = 11, .logprobs = 3}, {.logprobs = -1}};
  std::map<RequestId, size_t> which;
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<RequestId> id = engine->AddRequest(Request(prompts[i], sampling[i]));
    ASSERT_TRUE(id.ok()) << id.status();
    which[*id] = i;
  }
  std::vector<std::vector<TokenOutput>> tokens(prompts.size());
  while (engine->HasUnfinishedRequests()) {
    absl::StatusOr<StepOutput> step = engine->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (const TokenOutput& t : step->tokens) tokens[which[t.request_id]].push_back(t);
  }
  EXPECT_TRUE(std::all_of(tokens[2].begin(), tokens[2].end(),
                          [](const TokenOutput& t) { return !t.logprobs.has_value(); }));
  for (size_t i = 0; i < 2; ++i) {
    std::vector<TokenId> sequence = prompts[i];
    for (const TokenOutput& t : tokens[i]) sequence.push_back(t.token);
    const auto logits = ReferenceForward(model_).Logits(sequence);
    for (size_t g = 0; g < tokens[i].size(); ++g) {
      const TokenOutput& t = tokens[i][g];
      ASSERT_TRUE(t.logprobs.has_value()) << "request " << i << " token " << g;
      const std::vector<double> want = LogSoftmax(logits[prompts[i].size() - 1 + g]);
      EXPECT_NEAR(t.logprobs->logprob, want[static_cast<size_t>(t.token)], 1e-4);
      ASSERT_EQ(t.logprobs->top.size(), static_cast<size_t>(sampling[i].logprobs));
      for (const TokenLogprob& e : t.logprobs->top) {
        EXPECT_NEAR(e.logprob, want[static_cast<size_t>(e.token)], 1e-4);
      }
      // The top entries are the most probable tokens: nothing outside them is more probable.
      const float last = t.logprobs->top.back().logprob;
      for (size_t v = 0; v < want.size(); ++v) {
        const bool listed =
            std::any_of(t.logprobs->top.begin(), t.logprobs->top.end(),
                        [&](const TokenLogprob& e) { return e.token == TokenId(v); });
        if (!listed) {
          EXPECT_LE(want[v], last + 1e-4) << "token " << v;
        }
      }
      if (i == 0) {
        EXPECT_EQ(t.logprobs->top[0].token, t.token);  // greedy: the argmax
      }
    }
  }
}

// Prompt logprobs: every prompt token after the first, against the reference, the same when the
// prompt is cached (the request computes it anyway) and across chunked prefill.
TEST_F(EngineLogprobsTest, PromptLogprobsMatchTheReferenceColdAndCached) {
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.block_size = 4;
  o.num_kv_blocks = 128;
  o.scheduler.max_num_batched_tokens = 8;  // the 21-token prompt is computed in three chunks
  o.scheduler.enable_chunked_prefill = true;
  auto engine = *Engine::Create(weights_, o);
  std::vector<TokenId> prompt = {1};
  for (int i = 0; i < 20; ++i) prompt.push_back(static_cast<TokenId>(3 + (i * 7) % 50));
  const auto logits = ReferenceForward(model_).Logits(prompt);
  for (int run = 0; run < 2; ++run) {
    GenerationRequest request = Request(prompt, {.prompt_logprobs = 2});
    request.max_new_tokens = 1;
    absl::StatusOr<std::vector<GenerationResult>> done = engine->Generate({request});
    ASSERT_TRUE(done.ok()) << done.status();
    const GenerationResult& r = (*done)[0];
    EXPECT_EQ(r.num_prefix_hit_tokens, 0) << "run " << run;  // never read from the cache
    ASSERT_EQ(r.prompt_logprobs.size(), prompt.size() - 1);
    for (size_t i = 0; i + 1 < prompt.size(); ++i) {
      const std::vector<double> want = LogSoftmax(logits[i]);
      EXPECT_NEAR(r.prompt_logprobs[i].logprob, want[static_cast<size_t>(prompt[i + 1])], 1e-4)
          << "run " << run << " token " << i + 1;
      ASSERT_EQ(r.prompt_logprobs[i].top.size(), 2u);
      const auto best = std::max_element(want.begin(), want.end()) - want.begin();
      EXPECT_EQ(r.prompt_logprobs[i].top[0].token, best);
    }
  }
  // Without prompt logprobs the same prompt hits the cache the two runs filled.
  GenerationRequest plain = Request(prompt, {});
  plain.max_new_tokens = 1;
  absl::StatusOr<std::vector<GenerationResult>> done = engine->Generate({plain});
  ASSERT_TRUE(done.ok());
  EXPECT_GT((*done)[0].num_prefix_hit_tokens, 0);
  EXPECT_TRUE((*done)[0].prompt_logprobs.empty());
}

// A stream shows the prompt's logprobs before the request ends: the first token carries them
// (equal to the result's), later tokens and requests that did not ask carry none.
TEST_F(EngineLogprobsTest, TheFirstTokenCarriesThePromptLogprobs) {
  auto engine = MakeEngine();
  const absl::StatusOr<RequestId> asked =
      engine->AddRequest(Request({1, 7, 9, 30, 4, 12, 8}, {.prompt_logprobs = 3}));
  ASSERT_TRUE(asked.ok()) << asked.status();
  ASSERT_TRUE(engine->AddRequest(Request({1, 5, 5, 40}, {})).ok());
  std::vector<TokenOutput> mine;
  std::vector<TokenLogprobs> result;
  while (engine->HasUnfinishedRequests()) {
    absl::StatusOr<StepOutput> step = engine->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (const TokenOutput& t : step->tokens) {
      if (t.request_id == *asked) {
        mine.push_back(t);
      } else {
        EXPECT_FALSE(t.prompt_logprobs.has_value());
      }
    }
    for (const GenerationResult& r : step->finished) {
      if (r.request_id == *asked) result = r.prompt_logprobs;
    }
  }
  ASSERT_EQ(mine.size(), 12u);
  ASSERT_TRUE(mine[0].prompt_logprobs.has_value());
  ASSERT_EQ(mine[0].prompt_logprobs->size(), 6u);
  ASSERT_EQ(result.size(), 6u);
  for (size_t i = 0; i < result.size(); ++i) {
    EXPECT_EQ((*mine[0].prompt_logprobs)[i].logprob, result[i].logprob) << i;
    EXPECT_EQ((*mine[0].prompt_logprobs)[i].top.size(), 3u) << i;
  }
  for (size_t g = 1; g < mine.size(); ++g) {
    EXPECT_FALSE(mine[g].prompt_logprobs.has_value()) << g;
  }
}

TEST_F(EngineLogprobsTest, OutOfRangeLogprobsAreRefusedAndNothingIsAdded) {
  auto engine = MakeEngine();
  for (const int32_t bad : {-2, SamplingOptions::kMaxLogprobs + 1}) {
    absl::StatusOr<RequestId> id = engine->AddRequest(Request({1, 2, 3}, {.logprobs = bad}));
    ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(id.status().message(), HasSubstr("sampling.logprobs"));
    id = engine->AddRequest(Request({1, 2, 3}, {.prompt_logprobs = bad}));
    ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(id.status().message(), HasSubstr("sampling.prompt_logprobs"));
  }
  GenerationRequest chunked = Request({1, 2, 3, 4, 5}, {.prompt_logprobs = 0});
  chunked.chunks = {{.offset = 1, .length = 3}};
  EXPECT_THAT(engine->AddRequest(chunked).status().message(), HasSubstr("chunks"));
  EXPECT_FALSE(engine->HasUnfinishedRequests());
}

}  // namespace
}  // namespace pagedkv
