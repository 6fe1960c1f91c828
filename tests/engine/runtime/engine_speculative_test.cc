// Copyright 2026 The pagedkv Authors.
//
// Speculative decoding by prompt lookup (EngineOptions.speculative): greedy ids are identical to
// plain decoding for several K, on random test models (tied classifier: it repeats itself, so many
// drafts are accepted; separate classifier: few are) and on aidreams260K from ../shared/data.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;

std::shared_ptr<const ModelWeights> TinyWeights(bool shared_classifier) {
  TinyShape shape;
  shape.seq_len = 96;
  shape.shared_classifier = shared_classifier;
  const auto path = WriteTempFile(shared_classifier ? "spec_tied.bin" : "spec_untied.bin",
                                  MakeTinyLlama2c(shape, 31).FileBytes());
  absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
  EXPECT_TRUE(w.ok()) << w.status();
  return std::make_shared<const ModelWeights>(std::move(w).value());
}

EngineOptions Options(int32_t k, int32_t num_kv_blocks = 256) {
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.num_threads = 1;
  o.block_size = 4;
  o.num_kv_blocks = num_kv_blocks;
  o.speculative.num_speculative_tokens = k;
  return o;
}

// Prompts with repeated spans (so that prompt lookup finds n-grams), of several lengths.
std::vector<GenerationRequest> Requests(int32_t max_new_tokens) {
  std::mt19937 rng(11);
  std::vector<GenerationRequest> out;
  for (int len : {6, 13, 20, 27}) {
    std::vector<TokenId> p;
    for (int i = 0; i < len; ++i) p.push_back(static_cast<TokenId>(3 + rng() % 20));
    p.insert(p.end(), p.begin(), p.begin() + len / 2);
    out.push_back({.prompt_tokens = p, .max_new_tokens = max_new_tokens, .stop_at_eos = false});
  }
  return out;
}

struct Outcome {
  std::vector<std::vector<TokenId>> ids;
  EngineStats stats;
};

Outcome Generate(std::shared_ptr<const ModelWeights> weights, const EngineOptions& options,
                 std::vector<GenerationRequest> requests) {
  auto engine = Engine::Create(std::move(weights), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  auto results = (*engine)->Generate(std::move(requests));
  EXPECT_TRUE(results.ok()) << results.status();
  Outcome run;
  if (results.ok()) {
    for (const GenerationResult& r : *results) run.ids.push_back(r.output_tokens);
  }
  run.stats = (*engine)->stats();
  EXPECT_TRUE((*engine)->kv_cache_manager().ValidateInvariants().ok());
  return run;
}

TEST(EngineSpeculativeTest, GreedyIdsMatchPlainDecodingForSeveralK) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied classifier" : "separate classifier");
    const auto weights = TinyWeights(tied);
    const Outcome plain = Generate(weights, Options(0), Requests(40));
    ASSERT_EQ(plain.ids.size(), 4u);
    EXPECT_EQ(plain.stats.num_draft_tokens, 0);
    for (int32_t k : {1, 2, 4, 7}) {
      SCOPED_TRACE(k);
      const Outcome spec = Generate(weights, Options(k), Requests(40));
      EXPECT_EQ(spec.ids, plain.ids);
      EXPECT_GT(spec.stats.num_draft_tokens, 0);
      EXPECT_LE(spec.stats.num_accepted_draft_tokens, spec.stats.num_draft_tokens);
      EXPECT_EQ(spec.stats.num_generated_tokens, plain.stats.num_generated_tokens);
      // Every accepted draft saves one step of its request.
      if (tied) {
        EXPECT_GT(spec.stats.num_accepted_draft_tokens, 0);
      }
    }
  }
}

TEST(EngineSpeculativeTest, IdsMatchUnderPreemptionAndSmallBudgets) {
  const auto weights = TinyWeights(true);
  EngineOptions plain_options = Options(0, /*num_kv_blocks=*/30);
  plain_options.scheduler.max_num_batched_tokens = 9;
  const Outcome plain = Generate(weights, plain_options, Requests(50));
  EngineOptions spec_options = plain_options;
  spec_options.speculative.num_speculative_tokens = 5;
  const Outcome spec = Generate(weights, spec_options, Requests(50));
  EXPECT_EQ(spec.ids, plain.ids);
  EXPECT_GT(plain.stats.num_preemptions, 0);
  EXPECT_GT(spec.stats.num_preemptions, 0);
  EXPECT_GT(spec.stats.num_accepted_draft_tokens, 0);
}

TEST(EngineSpeculativeTest, SampledRequestsAreNotDrafted) {
  std::vector<GenerationRequest> requests = Requests(20);
  for (GenerationRequest& r : requests) r.sampling = {.temperature = 0.8f, .seed = 3};
  const Outcome run = Generate(TinyWeights(true), Options(4), requests);
  EXPECT_EQ(run.stats.num_draft_tokens, 0);
  EXPECT_EQ(run.stats.num_generated_tokens, 80);
}

TEST(EngineSpeculativeTest, LogitsRowsFollowTheTokens) {
  const auto weights = TinyWeights(true);
  EngineOptions options = Options(0);
  options.return_logits = true;
  auto plain = *Engine::Create(weights, options);
  options.speculative.num_speculative_tokens = 3;
  auto spec = *Engine::Create(weights, options);
  const int32_t vocab = plain->config().vocab_size;
  std::vector<std::vector<float>> rows[2];
  for (int e = 0; e < 2; ++e) {
    Engine& engine = e == 0 ? *plain : *spec;
    ASSERT_TRUE(engine.AddRequest(Requests(30)[3]).ok());
    while (engine.HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = engine.Step();
      ASSERT_TRUE(step.ok()) << step.status();
      ASSERT_EQ(step->logits.size(), step->tokens.size() * vocab);
      for (size_t t = 0; t < step->tokens.size(); ++t) {
        rows[e].emplace_back(step->logits.begin() + t * vocab,
                             step->logits.begin() + (t + 1) * vocab);
      }
    }
  }
  ASSERT_EQ(rows[0].size(), rows[1].size());
  EXPECT_LT(spec->stats().num_steps, plain->stats().num_steps);
  for (size_t t = 0; t < rows[0].size(); ++t) {
    for (int32_t v = 0; v < vocab; ++v) {
      ASSERT_NEAR(rows[1][t][v], rows[0][t][v], 1e-4 * (1.0 + std::abs(rows[0][t][v])))
          << "token " << t << " vocab " << v;
    }
  }
}

// Accepted drafts carry the logprobs of the rows that verified them: the same as without drafts.
TEST(EngineSpeculativeTest, LogprobsFollowTheTokens) {
  const auto weights = TinyWeights(true);
  std::vector<TokenOutput> tokens[2];
  for (int e = 0; e < 2; ++e) {
    auto engine = *Engine::Create(weights, Options(e == 0 ? 0 : 3));
    GenerationRequest request = Requests(30)[3];
    request.sampling.logprobs = 4;
    ASSERT_TRUE(engine->AddRequest(request).ok());
    while (engine->HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = engine->Step();
      ASSERT_TRUE(step.ok()) << step.status();
      tokens[e].insert(tokens[e].end(), step->tokens.begin(), step->tokens.end());
    }
    if (e == 1) {
      EXPECT_GT(engine->stats().num_accepted_draft_tokens, 0);
    }
  }
  ASSERT_EQ(tokens[0].size(), tokens[1].size());
  for (size_t t = 0; t < tokens[0].size(); ++t) {
    ASSERT_TRUE(tokens[0][t].logprobs.has_value() && tokens[1][t].logprobs.has_value());
    EXPECT_NEAR(tokens[1][t].logprobs->logprob, tokens[0][t].logprobs->logprob, 1e-4) << t;
    ASSERT_EQ(tokens[1][t].logprobs->top.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(tokens[1][t].logprobs->top[i].token, tokens[0][t].logprobs->top[i].token) << t;
    }
  }
}

TEST(EngineSpeculativeTest, BadOptionsAreRefused) {
  const auto weights = TinyWeights(true);
  for (SpeculativeOptions bad :
       {SpeculativeOptions{.num_speculative_tokens = -1},
        SpeculativeOptions{.num_speculative_tokens = 65},
        SpeculativeOptions{.num_speculative_tokens = 2, .prompt_lookup_min = 0},
        SpeculativeOptions{
            .num_speculative_tokens = 2, .prompt_lookup_min = 3, .prompt_lookup_max = 2}}) {
    EngineOptions o = Options(0);
    o.speculative = bad;
    EXPECT_EQ(Engine::Create(weights, o).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(EngineSpeculativeAidreamsTest, GreedyIdsMatchPlainDecoding) {
  auto dir = pagedkv::testing::SharedDataDir();
  if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const auto model = *dir / "aidreams260K" / "aidreams260K.bin";
  const auto tok = *dir / "aidreams260K" / "tok512.bin";
  if (!std::filesystem::exists(model) || !std::filesystem::exists(tok)) {
    GTEST_SKIP() << "aidreams260K not present";
  }
  auto run = [&](int32_t k) {
    EngineOptions options;
    options.backend = BackendKind::kCpu;
    options.num_threads = 1;
    options.speculative.num_speculative_tokens = k;
    auto engine = Engine::Load(model.string(), tok.string(), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    auto results =
        (*engine)->Generate({{.prompt_text = "", .max_new_tokens = 120},
                             {.prompt_text = "Echoes of", .max_new_tokens = 100},
                             {.prompt_text = "Once upon a time", .max_new_tokens = 100}});
    EXPECT_TRUE(results.ok()) << results.status();
    Outcome r;
    for (const GenerationResult& g : *results) r.ids.push_back(g.output_tokens);
    r.stats = (*engine)->stats();
    return r;
  };
  const Outcome plain = run(0);
  for (int32_t k : {1, 3, 5, 8}) {
    SCOPED_TRACE(k);
    const Outcome spec = run(k);
    EXPECT_EQ(spec.ids, plain.ids);
    EXPECT_GT(spec.stats.num_accepted_draft_tokens, 0);
    EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps);
  }
}

}  // namespace
}  // namespace pagedkv
