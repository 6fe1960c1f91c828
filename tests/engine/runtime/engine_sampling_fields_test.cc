// Copyright 2026 The pagedkv Authors.
//
// vLLM's sampling fields through the Engine (issue 42): the logit edits built for each row
// (prompt vs output token sets, drafts, min_tokens), penalties against a float64 reference applied
// by hand to the raw logits the engine returns, logit_bias forcing a token with logprobs still
// those of the raw logits, min_tokens keeping stop tokens out until reached, top_k 1 = greedy,
// speculative drafts giving the same tokens, and every bad value refused naming its field.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime/logit_edit_builder.h"
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
using ::pagedkv::testing::TinyLlama2c;
using ::pagedkv::testing::UntiedShape;
using ::testing::HasSubstr;

TEST(LogitEditBuilderTest, PromptTokensGetRepetitionOnlyAndOutputTokensAllPenalties) {
  const SamplingOptions s{.repetition_penalty = 1.5f,
                          .presence_penalty = 0.5f,
                          .frequency_penalty = 0.25f,
                          .min_tokens = 5};
  const std::vector<TokenId> prompt = internal::DistinctTokens(std::vector<TokenId>{7, 3, 7, 5});
  const std::vector<TokenId> output = {5, 8, 8};
  const std::vector<TokenId> drafts = {8};
  const std::vector<TokenId> stops = {2, 9};
  const std::vector<std::pair<TokenId, float>> bias = {{9, 3.0f}, {4, -1.0f}};
  const RowLogitEdits r = internal::BuildLogitEdits({.sampling = &s,
                                                     .logit_bias = bias,
                                                     .prompt_set = prompt,
                                                     .output = output,
                                                     .drafts = drafts,
                                                     .stop_tokens = stops},
                                                    /*row=*/3);
  EXPECT_EQ(r.row, 3);
  EXPECT_EQ(r.repetition_penalty, 1.5f);
  std::map<TokenId, LogitEdit> by;
  for (const LogitEdit& e : r.edits) by[e.token] = e;
  ASSERT_EQ(by.size(), 7u);  // 2 3 4 5 7 8 9
  EXPECT_TRUE(by[2].banned && !by[2].repeated);
  EXPECT_TRUE(by[3].repeated && by[3].output_count == 0);  // prompt only
  EXPECT_EQ(by[4].bias, -1.0f);
  EXPECT_TRUE(by[5].repeated && by[5].output_count == 1);  // prompt and output
  EXPECT_EQ(by[8].output_count, 3);                        // two outputs + one draft
  EXPECT_TRUE(by[9].banned && by[9].bias == 3.0f);
  EXPECT_TRUE(
      std::is_sorted(r.edits.begin(), r.edits.end(),
                     [](const LogitEdit& a, const LogitEdit& b) { return a.token < b.token; }));
  // Five tokens precede the row: min_tokens is reached and nothing is banned. Without a
  // repetition penalty the prompt is not read.
  const std::vector<TokenId> more = {8, 1};
  SamplingOptions t = s;
  t.repetition_penalty = 1.0f;
  const RowLogitEdits later = internal::BuildLogitEdits({.sampling = &t,
                                                         .prompt_set = prompt,
                                                         .output = output,
                                                         .drafts = more,
                                                         .stop_tokens = stops},
                                                        0);
  for (const LogitEdit& e : later.edits) {
    EXPECT_FALSE(e.banned || e.repeated) << e.token;
    EXPECT_NE(e.token, 3);
  }
  EXPECT_FALSE(internal::NeedsLogitEdits(SamplingOptions{.temperature = 1.0f, .top_k = 5}, {}));
  EXPECT_TRUE(internal::NeedsLogitEdits(SamplingOptions{.min_tokens = 1}, {}));
  EXPECT_TRUE(internal::NeedsLogitEdits(SamplingOptions{}, bias));
}

class EngineSamplingFieldsTest : public ::testing::Test {
 protected:
  EngineSamplingFieldsTest()
      : model_(MakeTinyLlama2c(UntiedShape(64), 57)),
        weights_(LoadTinyWeights(model_, "sampling_fields_model.bin")) {}

  struct Run {
    std::vector<TokenOutput> tokens;
    std::vector<std::vector<float>> raw_rows;  // StepOutput::logits of each token
    GenerationResult result;
  };

  Run Generate(const GenerationRequest& request, int32_t speculative = 0) {
    EngineOptions options{
        .backend = BackendKind::kCpu, .block_size = 4, .num_kv_blocks = 128, .return_logits = true};
    options.speculative.num_speculative_tokens = speculative;
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(weights_, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    Run run;
    EXPECT_TRUE((*engine)->AddRequest(request).ok());
    const auto vocab = static_cast<size_t>((*engine)->config().vocab_size);
    while ((*engine)->HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = (*engine)->Step();
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) break;
      for (size_t i = 0; i < step->tokens.size(); ++i) {
        run.tokens.push_back(step->tokens[i]);
        run.raw_rows.emplace_back(step->logits.begin() + static_cast<ptrdiff_t>(i * vocab),
                                  step->logits.begin() + static_cast<ptrdiff_t>((i + 1) * vocab));
      }
      for (GenerationResult& r : step->finished) run.result = std::move(r);
    }
    return run;
  }

  static std::vector<TokenId> Ids(const Run& run) {
    std::vector<TokenId> ids;
    for (const TokenOutput& t : run.tokens) ids.push_back(t.token);
    return ids;
  }

  static GenerationRequest Request(SamplingOptions sampling, int32_t max_new_tokens = 14) {
    return {.prompt_tokens = {1, 7, 9, 7, 30, 4},
            .max_new_tokens = max_new_tokens,
            .sampling = std::move(sampling),
            .stop_at_eos = false};
  }

  TinyLlama2c model_;
  std::shared_ptr<const ModelWeights> weights_;
};

// Each greedy token is the argmax of its raw row after the penalties, applied in float64 by hand:
// repetition over prompt + output so far (divide positive logits, multiply the others), frequency x
// count and presence over the output only.
TEST_F(EngineSamplingFieldsTest, PenaltiesMatchAHandAppliedReference) {
  const float rep = 1.8f, freq = 0.7f, presence = 0.4f;
  const GenerationRequest request =
      Request({.repetition_penalty = rep, .presence_penalty = presence, .frequency_penalty = freq});
  const Run run = Generate(request);
  ASSERT_EQ(run.tokens.size(), 14u);
  std::vector<TokenId> output;
  for (size_t g = 0; g < run.tokens.size(); ++g) {
    std::vector<double> row(run.raw_rows[g].begin(), run.raw_rows[g].end());
    for (size_t v = 0; v < row.size(); ++v) {
      const auto t = static_cast<TokenId>(v);
      const auto count = std::count(output.begin(), output.end(), t);
      const bool in_prompt =
          std::count(request.prompt_tokens.begin(), request.prompt_tokens.end(), t) > 0;
      if (in_prompt || count > 0) row[v] = row[v] > 0 ? row[v] / rep : row[v] * rep;
      if (count > 0) row[v] -= freq * static_cast<double>(count) + presence;
    }
    const auto want = static_cast<TokenId>(std::max_element(row.begin(), row.end()) - row.begin());
    EXPECT_EQ(run.tokens[g].token, want) << "token " << g;
    output.push_back(run.tokens[g].token);
  }
  // The penalties changed the greedy text of this model, which repeats itself without them.
  const std::vector<TokenId> plain = Ids(Generate(Request({})));
  EXPECT_NE(Ids(run), plain);
  EXPECT_LT(std::set<TokenId>(plain.begin(), plain.end()).size(), plain.size());
  // Speculative drafts (counted as output for the rows after them) give the same tokens.
  EXPECT_EQ(Ids(Generate(request, /*speculative=*/3)), Ids(run));
}

// A bias of 100 forces its token, greedy or sampled, while logprobs stay the raw distribution's.
TEST_F(EngineSamplingFieldsTest, LogitBiasForcesATokenAndLogprobsStayRaw) {
  for (const float temperature : {0.0f, 1.0f}) {
    GenerationRequest request = Request({.temperature = temperature, .seed = 3, .logprobs = 2});
    request.logit_bias = {{17, 100.0f}};
    const Run run = Generate(request);
    ASSERT_FALSE(run.tokens.empty());
    for (size_t g = 0; g < run.tokens.size(); ++g) {
      EXPECT_EQ(run.tokens[g].token, 17);
      ASSERT_TRUE(run.tokens[g].logprobs.has_value());
      EXPECT_FLOAT_EQ(run.tokens[g].logprobs->logprob,
                      TokenLogprobsOf(run.raw_rows[g], 17, 0).logprob);
      EXPECT_LT(run.tokens[g].logprobs->logprob, -0.5f);  // raw: 17 is not the model's choice
    }
  }
}

// Stop tokens (the model's first greedy token here) are banned until min_tokens tokens exist, and
// end the request right after.
TEST_F(EngineSamplingFieldsTest, MinTokensKeepsStopTokensOutUntilReached) {
  const TokenId first = Ids(Generate(Request({}))).at(0);
  GenerationRequest stopped = Request({});
  stopped.stop_tokens = {first};
  EXPECT_EQ(Ids(Generate(stopped)), std::vector<TokenId>{first});
  GenerationRequest held = Request({.min_tokens = 5}, /*max_new_tokens=*/30);
  held.stop_tokens = {first};
  const Run run = Generate(held);
  const std::vector<TokenId> ids = Ids(run);
  ASSERT_GE(ids.size(), 5u);
  for (size_t g = 0; g < 5; ++g) EXPECT_NE(ids[g], first) << g;
  EXPECT_EQ(std::count(ids.begin(), ids.end(), first), ids.back() == first ? 1 : 0);
  EXPECT_EQ(run.result.finish_reason,
            ids.back() == first ? FinishReason::kStop : FinishReason::kLength);
}

TEST_F(EngineSamplingFieldsTest, TopKOneIsGreedyAndMinPOneToo) {
  const std::vector<TokenId> greedy = Ids(Generate(Request({})));
  EXPECT_EQ(Ids(Generate(Request({.temperature = 1.5f, .seed = 9, .top_k = 1}))), greedy);
  EXPECT_EQ(Ids(Generate(Request({.temperature = 1.5f, .seed = 9, .min_p = 1.0f}))), greedy);
  EXPECT_NE(Ids(Generate(Request({.temperature = 1.5f, .seed = 9}))), greedy);
}

TEST_F(EngineSamplingFieldsTest, BadValuesAreRefusedNamingTheField) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(
      weights_, {.backend = BackendKind::kCpu, .block_size = 4, .num_kv_blocks = 64});
  ASSERT_TRUE(engine.ok()) << engine.status();
  using Bias = std::vector<std::pair<TokenId, float>>;
  const std::tuple<SamplingOptions, Bias, std::string> cases[] = {
      {{.top_k = -2}, {}, "top_k"},
      {{.min_p = 1.5f}, {}, "min_p"},
      {{.repetition_penalty = 0.0f}, {}, "repetition_penalty"},
      {{.repetition_penalty = INFINITY}, {}, "repetition_penalty"},
      {{.presence_penalty = 2.5f}, {}, "presence_penalty"},
      {{.frequency_penalty = NAN}, {}, "frequency_penalty"},
      {{}, {{64, 1.0f}}, "logit_bias"},
      {{}, {{-1, 1.0f}}, "logit_bias"},
      {{}, {{3, NAN}}, "logit_bias"},
      {{}, {{3, 1.0f}, {3, 2.0f}}, "logit_bias"},
      {{.min_tokens = 15}, {}, "min_tokens"},
      {{.min_tokens = -1}, {}, "min_tokens"}};
  for (const auto& [sampling, bias, field] : cases) {
    GenerationRequest request = Request(sampling);
    request.logit_bias = bias;
    const absl::StatusOr<RequestId> id = (*engine)->AddRequest(request);
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(id.status().message(), HasSubstr(field));
  }
  EXPECT_FALSE((*engine)->HasUnfinishedRequests());
}

}  // namespace
}  // namespace pagedkv
