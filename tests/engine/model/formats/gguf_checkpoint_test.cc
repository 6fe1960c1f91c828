// Copyright 2026 The pagedkv Authors.
//
// Test-made GGUF `llama` files (F32, F16, Q8_0, Q4_1 weights; tied and separate heads; GQA;
// linear RoPE scaling) loaded through LoadModel: the engine's logits match the float64 reference
// forward pass of hf_test_model.h on the values the file holds; the Q / K rows come back in
// Hugging Face order; bad metadata and tensors are refused naming the key or tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/model/runner/model_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/int8_linear.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/gguf_test_model.h"
#include "tests/engine/model/hf_test_model.h"
#include "tests/engine/model/prefill_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::AllRows;
using ::pagedkv::testing::GgufWriter;
using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::kGgufBF16;
using ::pagedkv::testing::kGgufF16;
using ::pagedkv::testing::kGgufF32;
using ::pagedkv::testing::kGgufQ4_0;
using ::pagedkv::testing::kGgufQ4_1;
using ::pagedkv::testing::kGgufQ4_K;
using ::pagedkv::testing::kGgufQ6_K;
using ::pagedkv::testing::kGgufQ8_0;
using ::pagedkv::testing::MakeHfTestModel;
using ::pagedkv::testing::PrefillLogits;
using ::pagedkv::testing::WriteGgufModel;
using ::testing::HasSubstr;

struct GgufCase {
  std::string name;
  HfTestSpec spec;
  uint32_t type;
  std::string tokenizer = "";  // "", "gpt2" or "llama": tokenizer metadata of the file
};

// A 64-token tokenizer of `kind` (the test model's vocabulary size): 3 control tokens, a-z,
// the space marker, the marker + each letter (merged first), and 0-7.
GgufWriter TokenizerMetadata(const std::string& kind) {
  const std::string mark = kind == "gpt2" ? "\xC4\xA0" : "\xE2\x96\x81";  // "Ġ" / "▁"
  std::vector<std::string> tokens =
      kind == "gpt2" ? std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
                     : std::vector<std::string>{"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {3, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  std::vector<std::string> merges;
  tokens.push_back(mark);
  for (char ch = 'a'; ch <= 'z'; ++ch) tokens.push_back(std::string(1, ch));
  for (char ch = 'a'; ch <= 'z'; ++ch) {
    tokens.push_back(mark + ch);
    merges.push_back(mark + " " + ch);
  }
  for (char ch = '0'; ch <= '7'; ++ch) tokens.push_back(std::string(1, ch));
  for (size_t i = 3; i < tokens.size(); ++i) {
    types.push_back(1);
    scores.push_back(tokens[i].size() > 1 && tokens[i] != mark ? -1.0f : -10.0f);
  }
  GgufWriter w;
  w.Str("tokenizer.ggml.model", kind);
  w.StrArray("tokenizer.ggml.tokens", tokens);
  w.NumArray<int32_t>("tokenizer.ggml.token_type", 5, types);
  if (kind == "gpt2") {
    w.StrArray("tokenizer.ggml.merges", merges);
  } else {
    w.NumArray<float>("tokenizer.ggml.scores", 6, scores);
  }
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", 2);
  return w;
}

std::vector<GgufCase> Cases() {
  HfTestSpec base;
  base.hidden = 64;  // every row a whole number of 32-value blocks
  HfTestSpec tied = base;
  tied.tie = true;
  tied.stored_tied = "model.embed_tokens.weight";
  HfTestSpec mha = base;
  mha.kv_heads = 4;
  HfTestSpec linear = base;
  linear.rope_scaling = {{"type", "linear"}, {"factor", 2.0}};
  HfTestSpec wide_heads = base;  // attention.key_length 16 != 32 / 4
  wide_heads.head_dim = 16;
  HfTestSpec narrow_heads = base;
  narrow_heads.head_dim = 4;
  HfTestSpec super = base;  // every row a whole number of 256-value super-blocks
  super.dim = 256;
  super.hidden = 256;
  return {{"F32KeyLength16", wide_heads, kGgufF32},
          {"F16KeyLength4", narrow_heads, kGgufF16},
          {"F32", base, kGgufF32},
          {"F16", base, kGgufF16},
          {"Q8_0", base, kGgufQ8_0},
          {"Q4_1", base, kGgufQ4_1},
          {"Q4_1TiedGpt2Tokenizer", tied, kGgufQ4_1, "gpt2"},
          {"Q8_0MhaLlamaTokenizer", mha, kGgufQ8_0, "llama"},
          {"F16RopeLinear", linear, kGgufF16},
          {"BF16", base, kGgufBF16},
          {"Q4_0", base, kGgufQ4_0},
          {"Q4_K", super, kGgufQ4_K},
          {"Q6_K", super, kGgufQ6_K},
          {"Q4_1Super", super, kGgufQ4_1},  // the super-block shape's controls for Q4_K
          {"Q8_0Super", super, kGgufQ8_0},
          {"Q4_KTiedGpt2Tokenizer",
           [&] {
             HfTestSpec t = super;
             t.tie = true;
             t.stored_tied = "model.embed_tokens.weight";
             return t;
           }(),
           kGgufQ4_K, "gpt2"}};
}

void PrintTo(const GgufCase& c, std::ostream* os) { *os << c.name; }

// The engine's logits at every position of `ids` ([position * vocab]).
std::vector<float> RunLogits(std::shared_ptr<const ModelWeights> weights,
                             const std::vector<TokenId>& ids,
                             ActivationType activations = ActivationType::kF32) {
  constexpr int kBlock = 4;
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner =
      ModelRunner::Create(std::move(weights), {.backend = BackendKind::kCpu,
                                               .num_blocks = 16,
                                               .block_size = kBlock,
                                               .activations = activations});
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return {};
  absl::StatusOr<std::vector<float>> logits = PrefillLogits(**runner, ids, AllRows(ids.size()));
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *std::move(logits) : std::vector<float>();
}

class GgufCheckpointTest : public ::testing::TestWithParam<GgufCase> {};

TEST_P(GgufCheckpointTest, LogitsMatchFloat64ReferenceAtEveryPosition) {
  const GgufCase& c = GetParam();
  HfTestModel model = MakeHfTestModel(c.spec, 23);
  const std::filesystem::path path = WriteGgufModel(
      &model, c.type, c.name, c.tokenizer.empty() ? GgufWriter() : TokenizerMetadata(c.tokenizer));
  absl::StatusOr<LoadedModel> loaded = LoadModel(path.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->format, "gguf");
  const ModelConfig& config = loaded->weights->config();
  EXPECT_EQ(config.shared_classifier, c.spec.tie);
  EXPECT_EQ(config.seq_len, c.spec.max_pos);
  ASSERT_TRUE(config.rope.has_value());
  EXPECT_EQ(config.rope->layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(config.rope->scaling,
            c.spec.rope_scaling.is_null() ? RopeScaling::kNone : RopeScaling::kLinear);
  constexpr int kTokens = 24;
  std::vector<TokenId> ids(kTokens);
  for (int t = 0; t < kTokens; ++t) ids[static_cast<size_t>(t)] = (t * 29 + 3) % c.spec.vocab;
  const std::vector<std::vector<double>> want =
      model.Logits(std::vector<int>(ids.begin(), ids.end()));
  // Weights fp32 and kept in the file's format (every matrix of these files: F16, BF16 and
  // block types whose rows are whole blocks): the same tolerance, and the same greedy id wherever
  // the reference's best logit leads its runner-up by more than the tolerance.
  for (WeightStorage storage : {WeightStorage::kF32, WeightStorage::kNative}) {
    SCOPED_TRACE(storage == WeightStorage::kF32 ? "f32 weights" : "native weights");
    absl::StatusOr<LoadedModel> each = LoadModel(path.string(), {.weights = storage});
    ASSERT_TRUE(each.ok()) << each.status();
    const bool block_file = c.type != kGgufF32;
    EXPECT_EQ(each->weights->has_native(), storage == WeightStorage::kNative && block_file);
    const std::vector<float> got = RunLogits(each->weights, ids);
    const size_t V = static_cast<size_t>(c.spec.vocab);
    ASSERT_EQ(got.size(), want.size() * V);
    for (size_t t = 0; t < want.size(); ++t) {
      double scale = 1.0, worst = 0.0;
      for (double w : want[t]) scale = std::max(scale, std::abs(w));
      for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::abs(got[t * V + i] - want[t][i]));
      EXPECT_LE(worst, 2e-4 * scale) << c.name << " position " << t;
      std::vector<double> sorted = want[t];
      std::sort(sorted.rbegin(), sorted.rend());
      if (sorted[0] - sorted[1] <= 4e-4 * scale) continue;
      const auto best = std::max_element(want[t].begin(), want[t].end()) - want[t].begin();
      const auto got_best =
          std::max_element(got.begin() + static_cast<std::ptrdiff_t>(t * V),
                           got.begin() + static_cast<std::ptrdiff_t>((t + 1) * V)) -
          (got.begin() + static_cast<std::ptrdiff_t>(t * V));
      EXPECT_EQ(got_best, best) << c.name << " position " << t;
    }
  }
  if (c.tokenizer.empty()) {
    EXPECT_EQ(loaded->tokenizer, nullptr);
    return;
  }
  ASSERT_NE(loaded->tokenizer, nullptr);
  absl::StatusOr<std::vector<TokenId>> text_ids =
      loaded->tokenizer->Encode("ab cd e", {.add_bos = false});
  ASSERT_TRUE(text_ids.ok()) << text_ids.status();
  // "ab cd e": (marker+)a b, marker+c d, marker+e (ids 4 + letter, 30 + letter); SentencePiece
  // ("llama") adds the dummy-prefix space, so its first token is marker+a.
  const TokenId first = c.tokenizer == "llama" ? 30 : 4;
  EXPECT_EQ(*text_ids, std::vector<TokenId>({first, 5, 32, 7, 34})) << c.tokenizer;
  EXPECT_EQ(*loaded->tokenizer->Decode(*text_ids), "ab cd e");
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  options.num_kv_blocks = 16;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(loaded->weights, options, loaded->tokenizer);
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::StatusOr<std::vector<GenerationResult>> out =
      (*engine)->Generate({{.prompt_text = "ab cd", .max_new_tokens = 4}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)[0].output_tokens.empty());
}

// Native block weights with int8 activations (the engine's default; Q4_K / Q6_K through the
// tiles of the VNNI or AVX2 kernel where the CPU has one, else fp32 activations): within the
// activations' rounding of the float64 reference, and its greedy id where the reference's lead is
// clear.
TEST_P(GgufCheckpointTest, Int8ActivationsStayNearTheFloat64Reference) {
  const GgufCase& c = GetParam();
  if (c.type == kGgufF32 || c.type == kGgufF16 || c.type == kGgufBF16) GTEST_SKIP() << "no blocks";
  HfTestModel model = MakeHfTestModel(c.spec, 23);
  const std::filesystem::path path = WriteGgufModel(
      &model, c.type, c.name, c.tokenizer.empty() ? GgufWriter() : TokenizerMetadata(c.tokenizer));
  absl::StatusOr<LoadedModel> loaded =
      LoadModel(path.string(), {.weights = WeightStorage::kNative});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  constexpr int kTokens = 24;
  std::vector<TokenId> ids(kTokens);
  for (int t = 0; t < kTokens; ++t) ids[static_cast<size_t>(t)] = (t * 29 + 3) % c.spec.vocab;
  const std::vector<std::vector<double>> want =
      model.Logits(std::vector<int>(ids.begin(), ids.end()));
  const std::vector<float> got = RunLogits(loaded->weights, ids, ActivationType::kInt8);
  const size_t V = static_cast<size_t>(c.spec.vocab);
  ASSERT_EQ(got.size(), want.size() * V);
  const bool super_block = c.type == kGgufQ4_K || c.type == kGgufQ6_K;
  if (!super_block || cpu::int8_kernels::Avx2Supported()) {  // the int8 path ran: other bits
    EXPECT_NE(got, RunLogits(loaded->weights, ids, ActivationType::kF32)) << c.name;
  }
  for (size_t t = 0; t < want.size(); ++t) {
    double scale = 1.0, worst = 0.0;
    for (double w : want[t]) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::abs(got[t * V + i] - want[t][i]));
    // Measured: at most 0.8% of the largest logit at the base shape, 2.7% at the super-block
    // shape (dim 256) for Q4_1, Q8_0 and Q4_K alike: the model, not the type, sets it.
    EXPECT_LE(worst, 4e-2 * scale) << c.name << " position " << t;
    std::vector<double> sorted = want[t];
    std::sort(sorted.rbegin(), sorted.rend());
    if (sorted[0] - sorted[1] <= 8e-2 * scale) continue;
    const auto best = std::max_element(want[t].begin(), want[t].end()) - want[t].begin();
    const auto row = got.begin() + static_cast<std::ptrdiff_t>(t * V);
    EXPECT_EQ(std::max_element(row, row + static_cast<std::ptrdiff_t>(V)) - row, best)
        << c.name << " position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GgufCheckpointTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<GgufCase>& info) {
                           return info.param.name;
                         });

// The file stores attn_q / attn_k in the converter's interleaved row order; the loader returns
// Hugging Face's exactly (F32: no rounding in between), and attn_v untouched.
TEST(GgufCheckpointTest, QkRowsComeBackInHuggingFaceOrder) {
  HfTestSpec spec;
  spec.hidden = 64;
  HfTestModel model = MakeHfTestModel(spec, 5);
  absl::StatusOr<LoadedModel> loaded =
      LoadModel(WriteGgufModel(&model, kGgufF32, "qk_order").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LayerWeights& l1 = loaded->weights->layer(1);
  const std::vector<double>& q = model.T(model.L(1, "self_attn.q_proj.weight"));
  const std::vector<double>& k = model.T(model.L(1, "self_attn.k_proj.weight"));
  const std::vector<double>& v = model.T(model.L(1, "self_attn.v_proj.weight"));
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(l1.wq[i], static_cast<float>(q[i])) << i;
  for (size_t i = 0; i < k.size(); ++i) ASSERT_EQ(l1.wk[i], static_cast<float>(k[i])) << i;
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(l1.wv[i], static_cast<float>(v[i])) << i;
}

std::string LoadError(HfTestModel* model, const std::string& name, GgufWriter extra,
                      uint32_t type = kGgufF32) {
  absl::StatusOr<LoadedModel> loaded =
      LoadModel(WriteGgufModel(model, type, name, std::move(extra)).string());
  EXPECT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << loaded.status();
  return std::string(loaded.status().message());
}

TEST(GgufCheckpointTest, RefusesWhatItCannotRunNamingTheKeyOrTensor) {
  HfTestSpec spec;
  spec.hidden = 64;
  HfTestModel model = MakeHfTestModel(spec, 7);
  GgufWriter extra_tensor;
  extra_tensor.Tensor("rope_freqs.weight", {4}, kGgufF32, std::string(16, '\0'));
  EXPECT_THAT(LoadError(&model, "rope_freqs", extra_tensor), HasSubstr("'rope_freqs.weight'"));
  GgufWriter stray;
  stray.Tensor("blk.0.attn_q.bias", {32}, kGgufF32, std::string(128, '\0'));
  EXPECT_THAT(LoadError(&model, "stray", stray), HasSubstr("'blk.0.attn_q.bias'"));
  GgufWriter yarn_attn;
  yarn_attn.Str("llama.rope.scaling.type", "longrope");
  EXPECT_THAT(LoadError(&model, "longrope", yarn_attn), HasSubstr("'longrope'"));
  GgufWriter partial;  // rope.dimension_count stays 8: partial rotary
  partial.U32("llama.attention.key_length", 4);
  EXPECT_THAT(LoadError(&model, "key_length", partial), HasSubstr("(8, 4, 4) must be equal"));
  GgufWriter value_width;
  value_width.U32("llama.attention.value_length", 16);
  EXPECT_THAT(LoadError(&model, "value_length", value_width),
              HasSubstr("(8, 8, 16) must be equal"));
  HfTestSpec tied = spec;  // writes no output.weight of its own
  tied.tie = true;
  tied.stored_tied = "model.embed_tokens.weight";
  HfTestModel tied_model = MakeHfTestModel(tied, 7);
  GgufWriter nan;
  nan.Tensor("output.weight", {32, 64}, kGgufF32, std::string(32 * 64 * 4, '\xff'));
  EXPECT_THAT(LoadError(&tied_model, "nan", nan),
              HasSubstr("tensor 'output.weight' holds a non-finite value"));
  GgufWriter arch;
  arch.Str("general.architecture", "qwen2");
  EXPECT_THAT(LoadError(&model, "arch", arch), HasSubstr("appears twice"));
}

}  // namespace
}  // namespace pagedkv
