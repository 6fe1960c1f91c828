// Copyright 2026 The pagedkv Authors.
//
// The engine on sliding-window models (issue 31): random-weight Hugging Face directories whose
// windows are shorter than the prompt, every layer windowed (MistralForCausalLM sliding_window) or
// windowed and full layers mixed (Qwen2ForCausalLM layer_types), served with block sizes 4 and 16,
// with and without chunked prefill, and a second request that reuses the first one's cached
// prefix. Every greedy id is checked, teacher-forced, against a float64 reference forward pass
// that applies transformers' masks (tests/engine/model/hf_test_model.h): the query at i reads key
// j iff j <= i and i - j < W.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/hf_reference_check.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::ExpectGreedyMatchesReference;
using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;

constexpr int kPromptTokens = 22;
constexpr int kNewTokens = 8;

struct WindowModel {
  std::string name;
  HfTestModel model;
};

std::vector<WindowModel> Models() {
  HfTestSpec mistral;
  mistral.arch = "MistralForCausalLM";
  mistral.layers = 3;
  mistral.layer_window = {5, 5, 5};
  mistral.config_patch = {{"sliding_window", 5}};
  HfTestSpec qwen2;
  qwen2.arch = "Qwen2ForCausalLM";
  qwen2.layers = 3;
  qwen2.layer_window = {4, 0, 4};
  qwen2.config_patch = {
      {"use_sliding_window", true},
      {"sliding_window", 4},
      {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}}};
  return {{"mistral_every_layer", MakeHfTestModel(mistral, 41)},
          {"qwen2_mixed", MakeHfTestModel(qwen2, 43)}};
}

TEST(EngineSlidingWindowTest, GreedyIdsMatchTheMaskedReference) {
  for (const WindowModel& wm : Models()) {
    absl::StatusOr<LoadedModel> loaded = LoadModel(wm.model.Write("engine_" + wm.name).string());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const ModelConfig& config = loaded->weights->config();
    ASSERT_EQ(config.layer_window, std::vector<int32_t>(wm.model.spec.layer_window.begin(),
                                                        wm.model.spec.layer_window.end()));
    std::vector<TokenId> a(kPromptTokens), b;
    for (int t = 0; t < kPromptTokens; ++t) a[t] = (t * 29 + 3) % wm.model.spec.vocab;
    b.assign(a.begin(), a.begin() + 16);  // shares 16 tokens (4 blocks of 4, 1 of 16) with a
    for (int t = 16; t < kPromptTokens + 3; ++t) b.push_back((t * 17 + 5) % wm.model.spec.vocab);
    for (int32_t block_size : {4, 16}) {
      for (int32_t chunk : {0, 5}) {  // 0: whole prompts; 5: prefill chunks of 5 tokens
        const std::string trace = wm.name + " block_size " + std::to_string(block_size) +
                                  " chunk " + std::to_string(chunk);
        EngineOptions options;
        options.backend = BackendKind::kCpu;
        options.block_size = block_size;
        options.num_kv_blocks = 64;
        options.scheduler.long_prefill_token_threshold = chunk;
        absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(loaded->weights, options);
        ASSERT_TRUE(engine.ok()) << engine.status();
        int checked = 0;
        for (int which = 0; which < 2; ++which) {  // b after a: a prefix-cache hit
          const std::vector<TokenId>& prompt = which == 0 ? a : b;
          GenerationRequest r{.prompt_tokens = prompt, .max_new_tokens = kNewTokens};
          r.stop_at_eos = false;
          absl::StatusOr<std::vector<GenerationResult>> out = (*engine)->Generate({r});
          ASSERT_TRUE(out.ok()) << trace << ": " << out.status();
          ASSERT_EQ(out->size(), 1u);
          ASSERT_EQ((*out)[0].output_tokens.size(), static_cast<size_t>(kNewTokens)) << trace;
          checked += ExpectGreedyMatchesReference(wm.model, prompt, (*out)[0].output_tokens, trace);
          if (which == 1 && block_size == 4) {
            EXPECT_EQ((*out)[0].num_prefix_hit_tokens, 16) << trace;
          }
        }
        EXPECT_GE(checked, kNewTokens) << trace << ": too many near-ties to check";
      }
    }
  }
}

// The windows matter: the masked reference's logits differ from full attention's past the
// tolerance the greedy check uses, so an engine that ignored them would fail above.
TEST(EngineSlidingWindowTest, WindowsChangeTheReferenceLogits) {
  for (const WindowModel& wm : Models()) {
    std::vector<int> ids(kPromptTokens);
    for (int t = 0; t < kPromptTokens; ++t) ids[t] = (t * 29 + 3) % wm.model.spec.vocab;
    HfTestModel full = wm.model;
    full.spec.layer_window = {};
    const auto windowed = wm.model.Logits(ids);
    const auto plain = full.Logits(ids);
    double diff = 0.0, scale = 1.0;
    for (size_t t = 0; t < windowed.size(); ++t) {
      for (size_t i = 0; i < windowed[t].size(); ++i) {
        diff = std::max(diff, std::abs(windowed[t][i] - plain[t][i]));
        scale = std::max(scale, std::abs(windowed[t][i]));
      }
    }
    EXPECT_GT(diff, 10 * 4e-4 * scale) << wm.name;
  }
}

}  // namespace
}  // namespace pagedkv
