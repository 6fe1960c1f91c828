// Copyright 2026 The pagedkv Authors.
//
// Sliding-window layers in the model configs: ModelConfig::layer_window (validation, text form),
// Hugging Face config.json as transformers reads it (MistralConfig's sliding_window, Qwen2Config's
// use_sliding_window / sliding_window / max_window_layers / layer_types, with their defaults), and
// GGUF llama.attention.sliding_window{,_pattern} as llama.cpp reads them; bad values are
// InvalidArgument naming the field. A windowed GGUF model's logits match the masked float64
// reference (tests/engine/model/hf_test_model.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/formats/hf_config.h"
#include "engine/model/runner/backend.h"
#include "engine/model/runner/model_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_source.h"
#include "tests/engine/model/gguf_test_model.h"
#include "tests/engine/model/gguf_test_writer.h"
#include "tests/engine/model/hf_test_model.h"
#include "tests/engine/model/prefill_util.h"

namespace pagedkv {
namespace {

using ::nlohmann::json;
using ::pagedkv::model_internal::HfConfig;
using ::pagedkv::model_internal::ParseHfConfig;
using ::pagedkv::testing::GgufWriter;
using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::kGgufF32;
using ::pagedkv::testing::MakeHfTestModel;
using ::pagedkv::testing::WriteGgufModel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ModelConfig SmallConfig() {
  return ModelConfig{.dim = 32,
                     .hidden_dim = 48,
                     .n_layers = 3,
                     .n_heads = 4,
                     .n_kv_heads = 2,
                     .vocab_size = 64,
                     .seq_len = 64};
}

TEST(ModelConfigWindowTest, ValidatesSizeAndSign) {
  ModelConfig c = SmallConfig();
  EXPECT_TRUE(c.Validate().ok());
  c.layer_window = {0, 4, 0};
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.LayerWindow(1), 4);
  EXPECT_TRUE(c.HasSlidingWindow());
  c.layer_window = {4, 4};
  absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("layer_window has 2 entries"));
  EXPECT_THAT(s.message(), HasSubstr("n_layers = 3"));
  c.layer_window = {0, -1, 4};
  s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("layer_window[1] = -1 must be >= 0"));
}

TEST(ModelConfigWindowTest, TextListsWindowsOnlyWhenALayerHasOne) {
  ModelConfig c = SmallConfig();
  const std::string plain = c.ToString();
  EXPECT_THAT(plain, ::testing::Not(HasSubstr("layer_window")));
  c.layer_window = {0, 0, 0};  // all full attention: the same text (and cache fingerprint)
  EXPECT_EQ(c.ToString(), plain);
  c.layer_window = {8, 0, 8};
  EXPECT_EQ(c.ToString(), plain + " layer_window=8,0,8");
}

// config.json of a 3-layer test model of `arch` with the fields of `patch` set (a null field is
// written as null, not removed).
absl::StatusOr<HfConfig> Parse(const std::string& arch, const json& patch) {
  HfTestSpec spec;
  spec.arch = arch;
  spec.layers = 3;
  json config = MakeHfTestModel(spec, 1).ConfigJson();
  for (auto it = patch.begin(); it != patch.end(); ++it) config[it.key()] = it.value();
  return ParseHfConfig(config.dump(), "", "dir");
}

std::vector<int32_t> Windows(const std::string& arch, const json& patch) {
  absl::StatusOr<HfConfig> hf = Parse(arch, patch);
  EXPECT_TRUE(hf.ok()) << hf.status();
  return hf.ok() ? hf->config.layer_window : std::vector<int32_t>{-99};
}

void ExpectRefused(const std::string& arch, const json& patch, const std::string& want) {
  absl::StatusOr<HfConfig> hf = Parse(arch, patch);
  ASSERT_FALSE(hf.ok()) << patch.dump();
  EXPECT_EQ(hf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hf.status().message(), HasSubstr("dir/config.json"));
  EXPECT_THAT(hf.status().message(), HasSubstr(want)) << patch.dump();
}

TEST(HfSlidingWindowTest, MistralWindowsEveryLayerNullIsNoneAbsentIsTheDefault) {
  const std::string m = "MistralForCausalLM";
  EXPECT_THAT(Windows(m, {{"sliding_window", 5}}), ElementsAre(5, 5, 5));
  EXPECT_THAT(Windows(m, {{"sliding_window", nullptr}}), IsEmpty());  // the test model's own
  // Absent: MistralConfig's default, 4096.
  HfTestSpec spec;
  spec.arch = m;
  spec.layers = 3;
  json config = MakeHfTestModel(spec, 1).ConfigJson();
  config.erase("sliding_window");
  absl::StatusOr<HfConfig> hf = ParseHfConfig(config.dump(), "", "dir");
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_THAT(hf->config.layer_window, ElementsAre(4096, 4096, 4096));
  // layer_types and use_sliding_window are not MistralConfig fields: ignored, as transformers.
  EXPECT_THAT(Windows(m, {{"sliding_window", 7},
                          {"use_sliding_window", false},
                          {"layer_types", {"full_attention", "full_attention", "full_attention"}}}),
              ElementsAre(7, 7, 7));
}

TEST(HfSlidingWindowTest, Qwen2UsesMaxWindowLayersOrLayerTypes) {
  const std::string q = "Qwen2ForCausalLM";
  EXPECT_THAT(Windows(q, {{"use_sliding_window", false}, {"sliding_window", 8}}), IsEmpty());
  // Layers with index >= max_window_layers are windowed.
  EXPECT_THAT(
      Windows(q, {{"use_sliding_window", true}, {"sliding_window", 8}, {"max_window_layers", 1}}),
      ElementsAre(0, 8, 8));
  EXPECT_THAT(
      Windows(q, {{"use_sliding_window", true}, {"sliding_window", 8}, {"max_window_layers", 0}}),
      ElementsAre(8, 8, 8));
  // Defaults: sliding_window 4096, max_window_layers 28 (> 3 layers: none windowed).
  EXPECT_THAT(Windows(q, {{"use_sliding_window", true}, {"max_window_layers", 2}}),
              ElementsAre(0, 0, 4096));
  EXPECT_THAT(Windows(q, {{"use_sliding_window", true}, {"sliding_window", 8}}), IsEmpty());
  // A null window is none, whatever max_window_layers says.
  EXPECT_THAT(
      Windows(
          q, {{"use_sliding_window", true}, {"sliding_window", nullptr}, {"max_window_layers", 0}}),
      IsEmpty());
  // layer_types wins over max_window_layers.
  EXPECT_THAT(
      Windows(q, {{"use_sliding_window", true},
                  {"sliding_window", 6},
                  {"max_window_layers", 0},
                  {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}}}),
      ElementsAre(6, 0, 6));
  EXPECT_THAT(Windows(q, {{"use_sliding_window", false},
                          {"layer_types", {"full_attention", "full_attention", "full_attention"}}}),
              IsEmpty());
}

TEST(HfSlidingWindowTest, BadWindowsAreRefusedNamingTheField) {
  const std::string q = "Qwen2ForCausalLM";
  ExpectRefused("MistralForCausalLM", {{"sliding_window", 0}}, "\"sliding_window\" must be");
  ExpectRefused("MistralForCausalLM", {{"sliding_window", "big"}}, "sliding_window");
  ExpectRefused(q, {{"use_sliding_window", true}, {"sliding_window", -4}},
                "\"sliding_window\" must be an integer in [1, 2^31) or null");
  ExpectRefused(q, {{"use_sliding_window", true}, {"max_window_layers", -1}},
                "\"max_window_layers\" must be >= 0");
  ExpectRefused(q,
                {{"use_sliding_window", true},
                 {"sliding_window", 4},
                 {"layer_types", {"sliding_attention", "full_attention"}}},
                "\"layer_types\" must be a list of 3 strings");
  ExpectRefused(q,
                {{"use_sliding_window", true},
                 {"sliding_window", 4},
                 {"layer_types", {"sliding_attention", "chunked_attention", "full_attention"}}},
                "unsupported \"layer_types\"[1] = \"chunked_attention\"");
  ExpectRefused(q,
                {{"use_sliding_window", false},
                 {"layer_types", {"sliding_attention", "full_attention", "full_attention"}}},
                "\"layer_types\"[0] is \"sliding_attention\" but there is no window");
  ExpectRefused("LlamaForCausalLM", {{"use_sliding_window", true}}, "use_sliding_window");
}

// A GGUF llama file of a 3-layer test model with `extra` metadata; its config or the error.
absl::StatusOr<LoadedModel> LoadGguf(const std::string& name, GgufWriter extra,
                                     HfTestModel* model = nullptr) {
  HfTestSpec spec;
  spec.layers = 3;
  HfTestModel local = MakeHfTestModel(spec, 29);
  HfTestModel* m = model != nullptr ? model : &local;
  const std::filesystem::path path = WriteGgufModel(m, kGgufF32, name, std::move(extra));
  absl::StatusOr<LoadedModel> loaded = LoadModel(path.string());
  std::filesystem::remove(path);
  return loaded;
}

std::vector<int32_t> GgufWindows(const std::string& name, GgufWriter extra) {
  absl::StatusOr<LoadedModel> loaded = LoadGguf(name, std::move(extra));
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->weights->config().layer_window : std::vector<int32_t>{-99};
}

TEST(GgufSlidingWindowTest, WindowAndPatternAsLlamaCppReadsThem) {
  EXPECT_THAT(GgufWindows("swa_none", {}), IsEmpty());
  GgufWriter zero;
  zero.U32("llama.attention.sliding_window", 0);
  EXPECT_THAT(GgufWindows("swa_zero", zero), IsEmpty());
  GgufWriter all;
  all.U32("llama.attention.sliding_window", 4);
  EXPECT_THAT(GgufWindows("swa_all", all), ElementsAre(4, 4, 4));
  GgufWriter flags;
  flags.U32("llama.attention.sliding_window", 5);
  flags.NumArray<uint8_t>("llama.attention.sliding_window_pattern", 7, {1, 0, 1});
  EXPECT_THAT(GgufWindows("swa_flags", flags), ElementsAre(5, 0, 5));
  // Period N: layer l windowed iff l % N < N - 1 (the last of each period is full).
  GgufWriter period;
  period.U32("llama.attention.sliding_window", 6);
  period.U32("llama.attention.sliding_window_pattern", 2);
  EXPECT_THAT(GgufWindows("swa_period", period), ElementsAre(6, 0, 6));
  GgufWriter period_one;  // every layer the last of its period: none
  period_one.U32("llama.attention.sliding_window", 6);
  period_one.U32("llama.attention.sliding_window_pattern", 1);
  EXPECT_THAT(GgufWindows("swa_period1", period_one), IsEmpty());
}

TEST(GgufSlidingWindowTest, BadKeysAreRefusedNamingTheKey) {
  GgufWriter negative;
  negative.I32("llama.attention.sliding_window", -2);
  absl::StatusOr<LoadedModel> a = LoadGguf("swa_negative", negative);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("'llama.attention.sliding_window' = -2"));
  GgufWriter short_flags;
  short_flags.U32("llama.attention.sliding_window", 4);
  short_flags.NumArray<uint8_t>("llama.attention.sliding_window_pattern", 7, {1, 0});
  absl::StatusOr<LoadedModel> b = LoadGguf("swa_short", short_flags);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("has 2 entries; it must have one per layer"));
  GgufWriter wrong_type;
  wrong_type.U32("llama.attention.sliding_window", 4);
  wrong_type.NumArray<float>("llama.attention.sliding_window_pattern", 6, {1, 0, 1});
  absl::StatusOr<LoadedModel> c = LoadGguf("swa_floats", wrong_type);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("sliding_window_pattern"));
}

// The runner's logits of a windowed GGUF model (windows 3 and full, prompt of 20 tokens, block 4)
// against the masked float64 reference at every position, on the CPU backend and, where a device
// is visible, the CUDA one.
TEST(GgufSlidingWindowTest, LogitsMatchTheMaskedReference) {
  HfTestSpec spec;
  spec.layers = 3;
  spec.layer_window = {3, 0, 3};
  HfTestModel model = MakeHfTestModel(spec, 31);
  GgufWriter extra;
  extra.U32("llama.attention.sliding_window", 3);
  extra.NumArray<uint8_t>("llama.attention.sliding_window_pattern", 7, {1, 0, 1});
  absl::StatusOr<LoadedModel> loaded = LoadGguf("swa_logits", extra, &model);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_THAT(loaded->weights->config().layer_window, ElementsAre(3, 0, 3));
  std::vector<TokenId> ids(20);
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<TokenId>((t * 29 + 3) % 64);
  const auto want = model.Logits(std::vector<int>(ids.begin(), ids.end()));
  model.spec.layer_window = {};
  const auto full = model.Logits(std::vector<int>(ids.begin(), ids.end()));
  double window_effect = 0.0, scale = 1.0;
  for (size_t t = 0; t < want.size(); ++t) {
    for (size_t i = 0; i < want[t].size(); ++i) {
      scale = std::max(scale, std::abs(want[t][i]));
      window_effect = std::max(window_effect, std::abs(full[t][i] - want[t][i]));
    }
  }
  // The windows change the logits well past the tolerance (the test would catch ignoring them).
  EXPECT_GT(window_effect, 10 * 2e-4 * scale);
  // CPU always; CUDA where the plugin and a device are there (no device: CPU only).
  std::vector<BackendKind> backends = {BackendKind::kCpu};
  if (CudaBackendAvailable()) backends.push_back(BackendKind::kCuda);
  for (BackendKind backend : backends) {
    absl::StatusOr<std::unique_ptr<ModelRunner>> runner = ModelRunner::Create(
        loaded->weights, {.backend = backend, .num_blocks = 8, .block_size = 4});
    ASSERT_TRUE(runner.ok()) << runner.status();
    absl::StatusOr<std::vector<float>> got =
        testing::PrefillLogits(**runner, ids, testing::AllRows(ids.size()));
    ASSERT_TRUE(got.ok()) << got.status();
    double worst = 0.0;
    for (size_t t = 0; t < want.size(); ++t) {
      for (size_t i = 0; i < want[t].size(); ++i) {
        worst = std::max(worst, std::abs((*got)[t * want[t].size() + i] - want[t][i]));
      }
    }
    EXPECT_LE(worst, 2e-4 * scale) << (backend == BackendKind::kCpu ? "cpu" : "cuda");
  }
}

}  // namespace
}  // namespace pagedkv
