// Copyright 2026 The pagedkv Authors.
//
// The engine's context limit under Hugging Face "dynamic" RoPE scaling in the per-step mode
// (engine/runtime/context_limit.h): keys written past max_position_embeddings depend on the step,
// so with prefix caching or chunk reuse on the engine stops at max_position_embeddings, and only
// with key reuse off does it accept the scaled context (max_position_embeddings * factor).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;
using ::testing::HasSubstr;

constexpr int kMaxPos = 16;

class EngineDynamicRopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HfTestSpec spec;
    spec.max_pos = kMaxPos;
    spec.rope_scaling = {{"rope_type", "dynamic"}, {"factor", 2.5}};
    absl::StatusOr<LoadedModel> model =
        LoadModel(MakeHfTestModel(spec, /*seed=*/5).Write("engine_dynamic_rope").string());
    ASSERT_TRUE(model.ok()) << model.status();
    weights_ = model->weights;
  }

  absl::StatusOr<std::unique_ptr<Engine>> Make(bool prefix_caching, bool overrun = false) {
    EngineOptions options;
    options.backend = BackendKind::kCpu;
    options.block_size = 4;
    options.num_kv_blocks = 64;
    options.enable_prefix_caching = prefix_caching;
    options.allow_context_overrun = overrun;
    return Engine::Create(weights_, options);
  }

  static GenerationRequest Prompt(int32_t tokens, int32_t max_new_tokens) {
    GenerationRequest r;
    for (int32_t i = 0; i < tokens; ++i) r.prompt_tokens.push_back(1 + i % 7);
    r.max_new_tokens = max_new_tokens;
    r.stop_at_eos = false;  // random weights: run every position
    return r;
  }

  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(EngineDynamicRopeTest, PrefixCachingStopsAtMaxPositionEmbeddings) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Make(/*prefix_caching=*/true);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->context_length(), kMaxPos);
  // Positions up to 15 run (prompt 10 + 7 new: the last run position is 15).
  absl::StatusOr<std::vector<GenerationResult>> fits = (*engine)->Generate({Prompt(10, 7)});
  ASSERT_TRUE(fits.ok()) << fits.status();
  const absl::Status past = (*engine)->AddRequest(Prompt(10, 8)).status();
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.message(), HasSubstr("dynamic RoPE"));
  EXPECT_THAT(past.message(), HasSubstr("--no-prefix-caching"));
  EXPECT_THAT(past.message(), HasSubstr("40 positions"));
  EXPECT_FALSE((*engine)->HasUnfinishedRequests());
}

TEST_F(EngineDynamicRopeTest, WithoutKeyReuseTheScaledContextRuns) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Make(/*prefix_caching=*/false);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->context_length(), 40);  // floor(16 * 2.5)
  absl::StatusOr<std::vector<GenerationResult>> out = (*engine)->Generate({Prompt(24, 10)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].output_tokens.size(), 10u);
}

TEST_F(EngineDynamicRopeTest, OverrunWithPrefixCachingIsRefused) {
  const absl::Status status = Make(/*prefix_caching=*/true, /*overrun=*/true).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("allow_context_overrun"));
  EXPECT_TRUE(Make(/*prefix_caching=*/false, /*overrun=*/true).ok());
}

}  // namespace
}  // namespace pagedkv
