// Copyright 2026 The pagedkv Authors.
#include "pagedkv/runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/model/tokenizer.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/engine/model/tiny_weights.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::LoadTinyWeights;
using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::ReferenceForward;
using ::pagedkv::testing::TinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::UntiedShape;
using ::testing::HasSubstr;
using ::testing::StartsWith;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kNewTokens = 12;
#else
constexpr int kNewTokens = 24;
#endif

class EngineTest : public ::testing::Test {
 protected:
  EngineTest()
      : model_(MakeTinyLlama2c(UntiedShape(96), 31)),
        weights_(LoadTinyWeights(model_, "engine_model.bin")) {}
  static EngineOptions Options() {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.block_size = 4;
    o.num_kv_blocks = 256;
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& options) {
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(weights_, options);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(e).value();
  }
  // Prompts that share prefixes of different lengths (some block-aligned, some not).
  std::vector<std::vector<TokenId>> SharedPrefixPrompts() const {
    std::mt19937 rng(77);
    auto random = [&](int n) {
      std::vector<TokenId> t(static_cast<size_t>(n));
      for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % 61);
      return t;
    };
    const std::vector<TokenId> system = random(21);
    std::vector<std::vector<TokenId>> prompts;
    for (int tail : {5, 9, 1, 14}) {
      std::vector<TokenId> p = system;
      const std::vector<TokenId> t = random(tail);
      p.insert(p.end(), t.begin(), t.end());
      prompts.push_back(p);
    }
    std::vector<TokenId> prefix_of_first(prompts[0].begin(), prompts[0].begin() + 12);
    prompts.push_back(prefix_of_first);
    prompts.push_back(random(7));
    return prompts;
  }
  static std::vector<GenerationRequest> Requests(const std::vector<std::vector<TokenId>>& prompts,
                                                 int max_new_tokens) {
    std::vector<GenerationRequest> out;
    for (const auto& p : prompts) {
      GenerationRequest r;
      r.prompt_tokens = p;
      r.max_new_tokens = max_new_tokens;
      r.stop_at_eos = false;
      out.push_back(r);
    }
    return out;
  }
  static std::vector<std::vector<TokenId>> Outputs(const std::vector<GenerationResult>& results) {
    std::vector<std::vector<TokenId>> out;
    for (const GenerationResult& r : results) out.push_back(r.output_tokens);
    return out;
  }

  TinyLlama2c model_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(EngineTest, GreedyLogitsMatchTheReferenceAtEveryGeneratedPosition) {
  EngineOptions options = Options();
  options.return_logits = true;
  auto engine = MakeEngine(options);
  const std::vector<TokenId> prompt = SharedPrefixPrompts()[0];
  ASSERT_TRUE(engine->AddRequest(Requests({prompt}, kNewTokens)[0]).ok());
  std::vector<TokenId> sequence = prompt;
  std::vector<std::vector<float>> rows;
  while (engine->HasUnfinishedRequests()) {
    absl::StatusOr<StepOutput> step = engine->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (size_t i = 0; i < step->tokens.size(); ++i) {
      sequence.push_back(step->tokens[i].token);
      rows.emplace_back(step->logits.begin() + static_cast<ptrdiff_t>(i) * 64,
                        step->logits.begin() + static_cast<ptrdiff_t>(i + 1) * 64);
    }
  }
  ASSERT_EQ(rows.size(), static_cast<size_t>(kNewTokens));
  const auto want = ReferenceForward(model_).Logits(sequence);
  for (size_t g = 0; g < rows.size(); ++g) {
    const std::vector<double>& ref = want[prompt.size() - 1 + g];
    double scale = 1.0, worst = 0.0;
    for (double x : ref) scale = std::max(scale, std::abs(x));
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(rows[g][i] - ref[i]));
    EXPECT_LE(worst, 1e-4 * scale) << "generated token " << g;
    // Greedy: the sampled token is the row's argmax.
    EXPECT_EQ(sequence[prompt.size() + g],
              std::max_element(rows[g].begin(), rows[g].end()) - rows[g].begin());
  }
}

TEST_F(EngineTest, PrefixCachingOnAndOffGiveIdenticalGreedyOutputs) {
  const auto prompts = SharedPrefixPrompts();
  std::vector<std::vector<TokenId>> outputs[2];
  int64_t hits[2] = {0, 0};
  for (int caching = 0; caching < 2; ++caching) {
    EngineOptions options = Options();
    options.enable_prefix_caching = caching == 1;
    auto engine = MakeEngine(options);
    // The first request runs alone so its blocks are cached before the others arrive.
    absl::StatusOr<std::vector<GenerationResult>> first =
        engine->Generate(Requests({prompts[0]}, kNewTokens));
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<std::vector<GenerationResult>> rest = engine->Generate(Requests(
        std::vector<std::vector<TokenId>>(prompts.begin() + 1, prompts.end()), kNewTokens));
    ASSERT_TRUE(rest.ok()) << rest.status();
    outputs[caching] = Outputs(*first);
    for (auto& o : Outputs(*rest)) outputs[caching].push_back(o);
    hits[caching] = engine->stats().num_prefix_hit_tokens;
    for (auto o : outputs[caching]) {
      EXPECT_EQ(o.size(), static_cast<size_t>(kNewTokens));
      std::sort(o.begin(), o.end());
      EXPECT_GE(std::unique(o.begin(), o.end()) - o.begin(), 3) << "a degenerate test model";
    }
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_EQ(hits[0], 0);
  EXPECT_GE(hits[1], 3 * 20);  // the three prompts extending the 21-token system prompt
}

TEST_F(EngineTest, BatchOfSharedPrefixRequestsEqualsEachAlone) {
  const auto prompts = SharedPrefixPrompts();
  std::vector<std::vector<TokenId>> alone;
  for (const auto& p : prompts) {
    auto engine = MakeEngine(Options());
    absl::StatusOr<std::vector<GenerationResult>> r = engine->Generate(Requests({p}, kNewTokens));
    ASSERT_TRUE(r.ok()) << r.status();
    alone.push_back(r->at(0).output_tokens);
  }
  auto engine = MakeEngine(Options());
  // Twice: the second round hits the blocks the first cached, mid-batch.
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<std::vector<GenerationResult>> batched =
        engine->Generate(Requests(prompts, kNewTokens));
    ASSERT_TRUE(batched.ok()) << batched.status();
    EXPECT_EQ(Outputs(*batched), alone) << "round " << round;
  }
  EXPECT_GT(engine->stats().num_prefix_hit_tokens, 0);
  int32_t max_seqs = 0;
  for (int32_t s : engine->stats().step_num_seqs) max_seqs = std::max(max_seqs, s);
  EXPECT_EQ(max_seqs, static_cast<int32_t>(prompts.size()));
}

TEST_F(EngineTest, SameStepPrefixHitsReadKvWrittenEarlierInTheBatch) {
  // Identical prompts admitted in one step: the later ones may hit blocks the first computes in
  // that very step (blocks are cached when allocated).
  const std::vector<TokenId> prompt = SharedPrefixPrompts()[3];
  auto alone = MakeEngine(Options());
  absl::StatusOr<std::vector<GenerationResult>> want =
      alone->Generate(Requests({prompt}, kNewTokens));
  ASSERT_TRUE(want.ok());
  auto engine = MakeEngine(Options());
  absl::StatusOr<std::vector<GenerationResult>> got =
      engine->Generate(Requests({prompt, prompt, prompt}, kNewTokens));
  ASSERT_TRUE(got.ok()) << got.status();
  for (const GenerationResult& r : *got) EXPECT_EQ(r.output_tokens, want->at(0).output_tokens);
  EXPECT_EQ(engine->stats().step_num_seqs.front(), 3);
  EXPECT_GT(engine->stats().num_prefix_hit_tokens, 0) << "no same-step hit: the test is moot";
}

// EngineOptions::enable_cache_priorities: a system prompt cached at priority 90 survives
// unrelated traffic that evicts it at the default priority.
TEST_F(EngineTest, PinnedSystemPromptSurvivesOtherTraffic) {
  std::mt19937 rng(5);
  auto random = [&](int n) {
    std::vector<TokenId> t(static_cast<size_t>(n));
    for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % 61);
    return t;
  };
  const std::vector<TokenId> system = random(20);  // 5 blocks of 4 tokens
  std::vector<TokenId> first = system, second = system;
  for (TokenId t : random(8)) first.push_back(t);
  for (TokenId t : random(8)) second.push_back(t);
  const std::vector<std::vector<TokenId>> churn = {random(60), random(60), random(60)};
  for (bool pin : {true, false}) {
    SCOPED_TRACE(pin ? "pinned" : "not pinned");
    EngineOptions options = Options();
    options.num_kv_blocks = 24;
    options.enable_cache_priorities = pin;
    auto engine = MakeEngine(options);
    GenerationRequest a = Requests({first}, 4)[0];
    a.cache_priority_spans = {{.begin_token = 0, .end_token = 20, .priority = {.priority = 90}}};
    ASSERT_TRUE(engine->Generate({a}).ok());
    for (const auto& prompt : churn) ASSERT_TRUE(engine->Generate(Requests({prompt}, 4)).ok());
    absl::StatusOr<std::vector<GenerationResult>> b = engine->Generate(Requests({second}, 4));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->at(0).num_prefix_hit_tokens, pin ? 20 : 0);
  }
}

TEST_F(EngineTest, BadCachePriorityIsRefusedByAddRequest) {
  EngineOptions options = Options();
  options.enable_cache_priorities = true;
  auto engine = MakeEngine(options);
  GenerationRequest r = Requests({{5, 6, 7}}, 2)[0];
  r.cache_priority.priority = 101;
  EXPECT_EQ(engine->AddRequest(r).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine->HasUnfinishedRequests());
}

TEST_F(EngineTest, GenerateLeavesOtherCallersResultsForTheNextStep) {
  const auto prompts = SharedPrefixPrompts();
  auto engine = MakeEngine(Options());
  // Another caller's requests: a short one that finishes during Generate, a long one after it.
  GenerationRequest quick = Requests({prompts[0]}, 2)[0];
  GenerationRequest slow = Requests({prompts[1]}, kNewTokens + 8)[0];
  absl::StatusOr<RequestId> quick_id = engine->AddRequest(quick);
  absl::StatusOr<RequestId> slow_id = engine->AddRequest(slow);
  ASSERT_TRUE(quick_id.ok() && slow_id.ok());
  absl::StatusOr<std::vector<GenerationResult>> mine =
      engine->Generate(Requests({prompts[2]}, kNewTokens));
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_NE(mine->at(0).request_id, *quick_id);
  EXPECT_NE(mine->at(0).request_id, *slow_id);
  EXPECT_TRUE(engine->HasUnfinishedRequests()) << "the slow request must still be queued";
  std::map<RequestId, GenerationResult> others;
  for (int step = 0; step < 1000 && (engine->HasUnfinishedRequests() || others.size() < 2);
       ++step) {
    absl::StatusOr<StepOutput> out = engine->Step();
    ASSERT_TRUE(out.ok()) << out.status();
    for (GenerationResult& r : out->finished) {
      EXPECT_TRUE(others.emplace(r.request_id, std::move(r)).second) << "reported twice";
    }
  }
  ASSERT_EQ(others.size(), 2u);
  EXPECT_EQ(others.at(*quick_id).output_tokens.size(), 2u);
  EXPECT_EQ(others.at(*slow_id).output_tokens.size(), static_cast<size_t>(kNewTokens + 8));
  EXPECT_EQ(engine->stats().num_finished, 3);
}

TEST_F(EngineTest, StepStatisticsStayBounded) {
  EngineOptions options = Options();
  options.enable_prefix_caching = false;
  auto engine = MakeEngine(options);
  // One request at a time, one token each: every Generate is one step of prompt.size() tokens.
  std::mt19937 rng(3);
  int32_t max_tokens = 0;
  std::vector<int64_t> histogram(EngineStats::kHistogramBuckets, 0);
  const size_t steps = EngineStats::kMaxRecordedSteps + 100;
  for (size_t i = 0; i < steps; ++i) {
    const int32_t len = 1 + static_cast<int32_t>(rng() % 40);
    std::vector<TokenId> prompt(static_cast<size_t>(len), 5);
    ASSERT_TRUE(engine->Generate(Requests({prompt}, 1)).ok());
    max_tokens = std::max(max_tokens, len);
    size_t bucket = 0;
    while ((int64_t{2} << bucket) <= len) ++bucket;  // 2^bucket <= len < 2^(bucket + 1)
    ++histogram[bucket];
  }
  const EngineStats& s = engine->stats();
  EXPECT_EQ(s.num_steps, static_cast<int64_t>(steps));
  EXPECT_EQ(s.step_num_tokens.size(), EngineStats::kMaxRecordedSteps);
  EXPECT_EQ(s.step_num_seqs.size(), EngineStats::kMaxRecordedSteps);
  EXPECT_EQ(s.max_step_num_tokens, max_tokens);
  EXPECT_EQ(s.max_step_num_seqs, 1);
  EXPECT_EQ(
      std::vector<int64_t>(s.step_num_tokens_histogram.begin(), s.step_num_tokens_histogram.end()),
      histogram);
}

TEST_F(EngineTest, PreemptionWithATinyCacheGivesIdenticalOutputs) {
  const auto prompts = SharedPrefixPrompts();
  auto big = MakeEngine(Options());
  absl::StatusOr<std::vector<GenerationResult>> want = big->Generate(Requests(prompts, kNewTokens));
  ASSERT_TRUE(want.ok());
  EngineOptions options = Options();
  options.num_kv_blocks = 16;  // 64 slots for six requests of up to 35 + 24 tokens
  auto small = MakeEngine(options);
  absl::StatusOr<std::vector<GenerationResult>> got =
      small->Generate(Requests(prompts, kNewTokens));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_GT(small->stats().num_preemptions, 0);
  EXPECT_EQ(Outputs(*got), Outputs(*want));
}

TEST_F(EngineTest, ChunkedPrefillAtAnyChunkSizeGivesTheSameLogitsAndTokens) {
  const std::vector<TokenId> prompt = SharedPrefixPrompts()[3];  // 35 tokens
  auto run = [&](int32_t budget, std::vector<float>* logits) {
    EngineOptions options = Options();
    options.return_logits = true;
    options.scheduler.max_num_batched_tokens = budget;
    auto engine = MakeEngine(options);
    EXPECT_TRUE(engine->AddRequest(Requests({prompt}, 4)[0]).ok());
    std::vector<TokenId> tokens;
    int64_t steps = 0;
    while (engine->HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = engine->Step();
      EXPECT_TRUE(step.ok()) << step.status();
      for (const TokenOutput& t : step->tokens) tokens.push_back(t.token);
      logits->insert(logits->end(), step->logits.begin(), step->logits.end());
      ++steps;
    }
    EXPECT_GE(steps, (35 + budget - 1) / budget + 3);
    return tokens;
  };
  std::vector<float> want_logits;
  const std::vector<TokenId> want = run(2048, &want_logits);
  for (int32_t chunk = 1; chunk <= 36; chunk += (chunk < 8 ? 1 : 5)) {
    std::vector<float> logits;
    EXPECT_EQ(run(chunk, &logits), want) << "chunk " << chunk;
    ASSERT_EQ(logits.size(), want_logits.size());
    for (size_t i = 0; i < logits.size(); ++i) {
      ASSERT_NEAR(logits[i], want_logits[i], 1e-4 * (1 + std::abs(want_logits[i])))
          << "chunk " << chunk << " element " << i;
    }
  }
}

TEST_F(EngineTest, SeededSamplingIsReproducibleAndBatchIndependent) {
  std::vector<GenerationRequest> requests = Requests(SharedPrefixPrompts(), kNewTokens);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].sampling = {.temperature = 0.9f, .top_p = 0.95f, .seed = 1000 + i};
  }
  auto a = MakeEngine(Options());
  absl::StatusOr<std::vector<GenerationResult>> batched = a->Generate(requests);
  ASSERT_TRUE(batched.ok());
  for (size_t i = 0; i < requests.size(); ++i) {
    auto b = MakeEngine(Options());
    absl::StatusOr<std::vector<GenerationResult>> alone = b->Generate({requests[i]});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(alone->at(0).output_tokens, batched->at(i).output_tokens);
    std::sort(alone->at(0).output_tokens.begin(), alone->at(0).output_tokens.end());
    EXPECT_GT(std::unique(alone->at(0).output_tokens.begin(), alone->at(0).output_tokens.end()) -
                  alone->at(0).output_tokens.begin(),
              4)
        << "sampling should vary the tokens";
  }
  // A different seed changes the tokens.
  requests[0].sampling.seed = 5;
  auto c = MakeEngine(Options());
  absl::StatusOr<std::vector<GenerationResult>> other = c->Generate({requests[0]});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->at(0).output_tokens, batched->at(0).output_tokens);
}

TEST_F(EngineTest, RequestsPastTheTrainedContextAreRefusedUnlessAllowed) {
  auto engine = MakeEngine(Options());
  EXPECT_EQ(engine->context_length(), 96);
  GenerationRequest r;
  r.prompt_tokens = std::vector<TokenId>(90, 5);
  r.max_new_tokens = 7;  // positions up to 95: fits exactly
  EXPECT_TRUE(engine->AddRequest(r).ok());
  r.max_new_tokens = 8;  // position 96
  absl::StatusOr<RequestId> refused = engine->AddRequest(r);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("trained context of 96"));
  EXPECT_THAT(refused.status().message(), HasSubstr("allow_context_overrun"));
  EXPECT_EQ(engine->stats().num_requests, 1);

  EngineOptions allow = Options();
  allow.allow_context_overrun = true;
  auto overrun = MakeEngine(allow);
  ASSERT_TRUE(overrun->AddRequest(r).ok());
  absl::StatusOr<std::vector<GenerationResult>> done = overrun->Generate({});
  ASSERT_TRUE(done.ok());
  while (overrun->HasUnfinishedRequests()) ASSERT_TRUE(overrun->Step().ok());

  // Linear RoPE scaling by 2 doubles the context.
  EngineOptions scaled = Options();
  RopeConfig rope;
  rope.head_dim = 8;
  rope.layout = RopeLayout::kInterleaved;
  rope.scaling = RopeScaling::kLinear;
  rope.factor = 2.0;
  rope.max_position_embeddings = 96;
  scaled.rope = rope;
  auto longer = MakeEngine(scaled);
  EXPECT_EQ(longer->context_length(), 192);
  EXPECT_TRUE(longer->AddRequest(r).ok());
}

TEST_F(EngineTest, BadRequestsChangeNothing) {
  auto engine = MakeEngine(Options());
  GenerationRequest text;
  text.prompt_text = "hello";
  EXPECT_EQ(engine->AddRequest(text).status().code(), absl::StatusCode::kInvalidArgument);
  GenerationRequest bad_token;
  bad_token.prompt_tokens = {1, 64};
  EXPECT_EQ(engine->AddRequest(bad_token).status().code(), absl::StatusCode::kInvalidArgument);
  GenerationRequest zero;
  zero.max_new_tokens = 0;
  EXPECT_EQ(engine->AddRequest(zero).status().code(), absl::StatusCode::kInvalidArgument);
  GenerationRequest top_p;
  top_p.sampling.top_p = 0.0f;
  EXPECT_EQ(engine->AddRequest(top_p).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(engine->HasUnfinishedRequests());
  EXPECT_EQ(engine->stats().num_requests, 0);
  // Generate with one bad request queues none of its requests.
  std::vector<GenerationRequest> mixed = Requests({{1, 2, 3}}, 4);
  mixed.push_back(bad_token);
  EXPECT_EQ(engine->Generate(mixed).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<StepOutput> step = engine->Step();
  ASSERT_TRUE(step.ok());
  EXPECT_TRUE(step->tokens.empty());
  EXPECT_FALSE(engine->HasUnfinishedRequests());
  EXPECT_EQ(engine->stats().num_requests, 0);
}

TEST_F(EngineTest, EmptyPromptStartsFromBosAndAbortIsReported) {
  auto engine = MakeEngine(Options());
  absl::StatusOr<RequestId> id = engine->AddRequest({.max_new_tokens = 50, .stop_at_eos = false});
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_TRUE(engine->AbortRequest(*id).ok());
  EXPECT_EQ(engine->AbortRequest(*id + 100).code(), absl::StatusCode::kNotFound);
  absl::StatusOr<StepOutput> step = engine->Step();
  ASSERT_TRUE(step.ok());
  ASSERT_EQ(step->finished.size(), 1u);
  EXPECT_EQ(step->finished[0].finish_reason, FinishReason::kAborted);
  EXPECT_EQ(step->finished[0].prompt_tokens, std::vector<TokenId>({Tokenizer::kBosId}));
  EXPECT_FALSE(engine->HasUnfinishedRequests());
}

// n samples of one prompt (as `serve` admits them: n requests sharing the prompt's full blocks):
// aborting one frees only its own blocks. The pool (21 blocks) holds the survivors (5 shared + 3
// each) and a fourth request (10) only if the aborted sample's blocks came back, and the
// survivors still give the tokens of a run without the abort: their shared prompt blocks were
// neither freed nor overwritten by the fourth request.
TEST_F(EngineTest, AbortingOneOfNSamplesFreesOnlyItsOwnBlocks) {
  std::mt19937 rng(91);
  std::vector<TokenId> prompt(22), other(30);
  for (TokenId& t : prompt) t = static_cast<TokenId>(3 + rng() % 61);
  for (TokenId& t : other) t = static_cast<TokenId>(3 + rng() % 61);
  EngineOptions o = Options();
  o.num_kv_blocks = 21;
  const std::vector<GenerationRequest> three = Requests({prompt, prompt, prompt}, 10);
  auto reference = MakeEngine(o);
  absl::StatusOr<std::vector<GenerationResult>> want = reference->Generate(three);
  ASSERT_TRUE(want.ok()) << want.status();
  auto engine = MakeEngine(o);
  std::vector<RequestId> ids;
  for (const GenerationRequest& r : three) ids.push_back(*engine->AddRequest(r));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->AbortRequest(ids[2]).ok());
  ASSERT_TRUE(engine->AddRequest(Requests({other}, 10)[0]).ok());
  std::vector<GenerationResult> done;
  while (engine->HasUnfinishedRequests()) {
    absl::StatusOr<StepOutput> step = engine->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (GenerationResult& r : step->finished) done.push_back(std::move(r));
  }
  int survivors = 0;
  for (const GenerationResult& r : done) {
    if (r.request_id == ids[0] || r.request_id == ids[1]) {
      ++survivors;
      EXPECT_EQ(r.output_tokens, (*want)[0].output_tokens);
      EXPECT_EQ(r.num_prefix_hit_tokens, r.request_id == ids[0] ? 0 : 20);
    }
    if (r.request_id == ids[2]) {
      EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
    }
  }
  EXPECT_EQ(survivors, 2);
  EXPECT_EQ(engine->stats().num_preemptions, 0);  // the pool held what ran
}

TEST_F(EngineTest, BadOptionsAreInvalidArgument) {
  EngineOptions options = Options();
  options.block_size = 0;
  EXPECT_EQ(Engine::Create(weights_, options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options();
  options.eviction_policy = "random";
  EXPECT_EQ(Engine::Create(weights_, options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options();
  options.scheduler.max_num_seqs = 0;
  EXPECT_EQ(Engine::Create(weights_, options).status().code(), absl::StatusCode::kInvalidArgument);
  for (int32_t threads : {-1, 1025}) {
    options = Options();
    options.num_threads = threads;
    const absl::Status status = Engine::Create(weights_, options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << threads;
    EXPECT_NE(status.message().find("num_threads"), std::string::npos) << status;
  }
  EXPECT_EQ(Engine::Load("/nonexistent/model.bin", "", Options()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(EngineAidreamsTest, GreedyFromBosWritesTheDream) {
  auto dir = pagedkv::testing::SharedDataDir();
  if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const auto model = *dir / "aidreams260K" / "aidreams260K.bin";
  const auto tok = *dir / "aidreams260K" / "tok512.bin";
  if (!std::filesystem::exists(model) || !std::filesystem::exists(tok)) {
    GTEST_SKIP() << "aidreams260K not present";
  }
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Load(model.string(), tok.string(), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::vector<GenerationResult>> out =
      (*engine)->Generate({{.prompt_text = "", .max_new_tokens = 40}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->at(0).text, StartsWith("\"Echoes of vectors unfold,")) << out->at(0).text;
  // A mismatched vocabulary is refused.
  absl::StatusOr<Tokenizer> small = Tokenizer::Load(tok.string(), 512);
  ASSERT_TRUE(small.ok());
  ModelConfig c = (*engine)->config();
  c.vocab_size = 256;
  absl::StatusOr<ModelWeights> random = ModelWeights::Random(c);
  ASSERT_TRUE(random.ok());
  EXPECT_EQ(Engine::Create(std::make_shared<const ModelWeights>(std::move(random).value()), options,
                           std::make_shared<const Tokenizer>(std::move(small).value()))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
