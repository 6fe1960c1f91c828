// Copyright 2026 The pagedkv Authors.
//
// Samples of one prompt (GenerationRequest::prompt_source, what `n` > 1 runs on): the samples take
// the source's prompt KV (full blocks shared, the partial last block copied by the engine before
// the step) and compute only the last prompt token, yet sample exactly what each would alone:
// the same tokens and the same log-probabilities, bit for bit, for every KV dtype (a copied
// block carries its quantization scales).
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/dtype.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/engine/model/tiny_weights.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::LoadTinyWeights;
using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::UntiedShape;

struct Sampled {
  std::vector<TokenId> tokens;
  std::vector<float> logprobs;
};

class EngineSamplesTest : public ::testing::TestWithParam<DType> {
 protected:
  EngineSamplesTest()
      : weights_(LoadTinyWeights(MakeTinyLlama2c(UntiedShape(64), 57), "samples_model.bin")) {}

  std::unique_ptr<Engine> MakeEngine() {
    absl::StatusOr<std::unique_ptr<Engine>> e =
        Engine::Create(weights_, {.backend = BackendKind::kCpu,
                                  .block_size = 4,
                                  .num_kv_blocks = 128,
                                  .kv_dtype = GetParam()});
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(e).value();
  }
  // Sample i of `prompt`: its own seed, logprobs on.
  static GenerationRequest Request(const std::vector<TokenId>& prompt, int i) {
    GenerationRequest r;
    r.prompt_tokens = prompt;
    r.max_new_tokens = 8;
    r.stop_at_eos = false;
    r.sampling = {.temperature = 0.8f, .seed = 21 + static_cast<uint64_t>(i), .logprobs = 1};
    return r;
  }
  // Runs the engine to the end; what each of `ids` sampled.
  static std::vector<Sampled> Drain(Engine& engine, const std::vector<RequestId>& ids) {
    std::vector<Sampled> out(ids.size());
    while (engine.HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = engine.Step();
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) break;
      for (const TokenOutput& t : step->tokens) {
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] != t.request_id) continue;
          out[i].tokens.push_back(t.token);
          out[i].logprobs.push_back(t.logprobs.has_value() ? t.logprobs->logprob : 1.0f);
        }
      }
    }
    return out;
  }

  std::shared_ptr<const ModelWeights> weights_;
};

TEST_P(EngineSamplesTest, SamplesFromOneSourceEqualSamplesAlone) {
  // 10 tokens: two full blocks and a partial one; 12: whole blocks (the last one is copied).
  for (const int32_t length : {10, 12}) {
    SCOPED_TRACE(length);
    std::vector<TokenId> prompt = {1};
    for (int32_t i = 1; i < length; ++i) prompt.push_back(3 + (i * 7) % 50);
    constexpr int kSamples = 4;
    std::unique_ptr<Engine> shared = MakeEngine();
    std::vector<RequestId> ids;
    for (int i = 0; i < kSamples; ++i) {
      GenerationRequest r = Request(prompt, i);
      if (i > 0) r.prompt_source = ids[0];
      absl::StatusOr<RequestId> id = shared->AddRequest(r);
      ASSERT_TRUE(id.ok()) << id.status();
      ids.push_back(*id);
    }
    const std::vector<Sampled> together = Drain(*shared, ids);
    const int64_t hit = (length - 1) / 4 * 4;
    EXPECT_EQ(shared->scheduler().stats().num_copied_tokens, (kSamples - 1) * (length - 1 - hit));
    EXPECT_EQ(shared->stats().num_prefix_hit_tokens, (kSamples - 1) * hit);
    for (int i = 0; i < kSamples; ++i) {
      std::unique_ptr<Engine> alone = MakeEngine();
      absl::StatusOr<RequestId> id = alone->AddRequest(Request(prompt, i));
      ASSERT_TRUE(id.ok()) << id.status();
      const Sampled want = Drain(*alone, {*id})[0];
      ASSERT_EQ(want.tokens.size(), 8u);
      EXPECT_EQ(together[static_cast<size_t>(i)].tokens, want.tokens) << "sample " << i;
      EXPECT_EQ(together[static_cast<size_t>(i)].logprobs, want.logprobs) << "sample " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvDTypes, EngineSamplesTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kInt8,
                                           DType::kFp8E4M3),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(EngineSamplesBadInputTest, ASourceOfAnotherPromptIsRefusedAndAFinishedOneIgnored) {
  auto weights = LoadTinyWeights(MakeTinyLlama2c(UntiedShape(64), 57), "samples_bad_model.bin");
  std::unique_ptr<Engine> engine =
      Engine::Create(weights, {.backend = BackendKind::kCpu, .block_size = 4, .num_kv_blocks = 64})
          .value();
  GenerationRequest source;
  source.prompt_tokens = {1, 5, 6, 7, 8, 9};
  source.max_new_tokens = 2;
  const RequestId id = engine->AddRequest(source).value();
  GenerationRequest other = source;
  other.prompt_tokens = {1, 5, 6};
  other.prompt_source = id;
  const absl::StatusOr<RequestId> refused = engine->AddRequest(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("prompt_source"), std::string::npos);
  GenerationRequest salted = source;
  salted.cache_salt = "tenant";
  salted.prompt_source = id;
  EXPECT_EQ(engine->AddRequest(salted).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->scheduler().num_waiting(), 1);  // nothing of the refused ones queued
  ASSERT_TRUE(engine->Generate({}).ok());
  while (engine->HasUnfinishedRequests()) ASSERT_TRUE(engine->Step().ok());
  GenerationRequest late = source;
  late.prompt_source = id;  // finished: the prompt comes from the prefix cache as usual
  absl::StatusOr<std::vector<GenerationResult>> done = engine->Generate({late});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ((*done)[0].num_prefix_hit_tokens, 4);
}

}  // namespace
}  // namespace pagedkv
