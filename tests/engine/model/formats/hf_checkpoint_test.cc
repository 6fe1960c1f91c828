// Copyright 2026 The pagedkv Authors.
//
// Test-made Hugging Face directories (random weights, every supported architecture and option)
// loaded through LoadModel and run by the ModelRunner, against a float64 reference forward pass
// at every position (tests/engine/model/hf_test_model.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/layer_hook.h"
#include "engine/model/runner/model_runner.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/status_macros.h"
#include "tests/engine/model/hf_test_model.h"
#include "tests/engine/model/prefill_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;
using ::pagedkv::testing::PrefillLogits;

struct HfCase {
  std::string name;
  HfTestSpec spec;
};

std::vector<HfCase> Cases() {
  std::vector<HfCase> cases;
  cases.push_back({"LlamaGqaUntiedF32", {}});
  HfTestSpec mha;
  mha.kv_heads = 4;
  mha.write_head_dim = true;
  cases.push_back({"LlamaMhaHeadDimGiven", mha});
  // head_dim != hidden_size / heads (= 8): q_proj [heads * head_dim, hidden], GQA 4:2.
  HfTestSpec wide_heads;
  wide_heads.head_dim = 16;
  cases.push_back({"HeadDimLargerGqa", wide_heads});
  HfTestSpec narrow_heads;
  narrow_heads.head_dim = 4;
  narrow_heads.dtype = "BF16";
  cases.push_back({"HeadDimSmallerGqaBf16", narrow_heads});
  HfTestSpec odd_split;  // hidden 36 is no multiple of 8 heads: only head_dim says the width
  odd_split.dim = 36;
  odd_split.heads = 8;
  odd_split.kv_heads = 2;
  odd_split.head_dim = 12;
  odd_split.arch = "Qwen2ForCausalLM";
  odd_split.rope_scaling = {{"rope_type", "linear"}, {"factor", 2.0}};
  cases.push_back({"HeadDimQwen2BiasesHiddenNotDivisible", odd_split});
  HfTestSpec tied_head;
  tied_head.tie = true;
  tied_head.dtype = "BF16";
  cases.push_back({"TiedLmHeadOnlyBf16", tied_head});
  HfTestSpec tied_embed = tied_head;
  tied_embed.stored_tied = "model.embed_tokens.weight";
  tied_embed.dtype = "F16";
  cases.push_back({"TiedEmbedOnlyF16", tied_embed});
  HfTestSpec mistral;
  mistral.arch = "MistralForCausalLM";
  mistral.shards = 3;
  cases.push_back({"MistralSharded", mistral});
  HfTestSpec qwen;
  qwen.arch = "Qwen2ForCausalLM";
  qwen.theta = 1000000.0;
  qwen.kv_heads = 1;
  cases.push_back({"Qwen2Biases", qwen});
  HfTestSpec qwen_bf16 = qwen;
  qwen_bf16.dtype = "BF16";
  qwen_bf16.shards = 2;
  cases.push_back({"Qwen2ShardedBf16", qwen_bf16});
  HfTestSpec linear;
  linear.rope_scaling = {{"type", "linear"}, {"factor", 2.0}};
  cases.push_back({"RopeLinear", linear});
  HfTestSpec dynamic;
  dynamic.rope_scaling = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  cases.push_back({"RopeDynamic", dynamic});
  HfTestSpec yarn;
  yarn.rope_scaling = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}};
  cases.push_back({"RopeYarn", yarn});
  HfTestSpec llama3;
  llama3.theta = 500000.0;
  llama3.rope_scaling = {{"rope_type", "llama3"},
                         {"factor", 8.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 16}};
  cases.push_back({"RopeLlama3", llama3});
  return cases;
}

void PrintTo(const HfCase& c, std::ostream* os) { *os << c.name; }

class HfCheckpointTest : public ::testing::TestWithParam<HfCase> {};

constexpr int kBlock = 4, kTokens = 40;

std::vector<TokenId> TestIds(int vocab) {
  std::vector<TokenId> ids(kTokens);
  for (int t = 0; t < kTokens; ++t) ids[static_cast<size_t>(t)] = (t * 37 + 5) % vocab;
  return ids;
}

// `got` holds the rows `positions` of `want` ([position][vocab]), each within 2e-4 of its scale.
void ExpectNear(const std::vector<float>& got, const std::vector<std::vector<double>>& want,
                const std::vector<int32_t>& positions, const std::string& name) {
  const size_t V = want[0].size();
  ASSERT_EQ(got.size(), positions.size() * V);
  for (size_t r = 0; r < positions.size(); ++r) {
    const std::vector<double>& w = want[static_cast<size_t>(positions[r])];
    double scale = 1.0, worst = 0.0;
    for (double x : w) scale = std::max(scale, std::abs(x));
    for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::abs(got[r * V + i] - w[i]));
    EXPECT_LE(worst, 2e-4 * scale) << name << " position " << positions[r];
  }
}

TEST_P(HfCheckpointTest, LogitsMatchFloat64ReferenceAtEveryPosition) {
  const HfCase& c = GetParam();
  const HfTestModel model = MakeHfTestModel(c.spec, 17);
  absl::StatusOr<LoadedModel> loaded = LoadModel(model.Write(c.name).string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->format, "huggingface");
  EXPECT_EQ(loaded->weights->config().stop_token_ids, std::vector<int32_t>({2, 3}));
  EXPECT_EQ(loaded->weights->config().head_dim(), model.head_dim());
  const std::vector<TokenId> ids = TestIds(c.spec.vocab);
  const std::vector<std::vector<double>> want =
      model.Logits(std::vector<int>(ids.begin(), ids.end()));
  std::vector<int32_t> all(kTokens);
  std::iota(all.begin(), all.end(), 0);
  // fp32 weights, and native ones (F16 / BF16 matrices kept as stored): all positions in one
  // prefill (the kernels' many-rows path) and the first token alone (the one-row path).
  for (WeightStorage storage : {WeightStorage::kF32, WeightStorage::kNative}) {
    SCOPED_TRACE(storage == WeightStorage::kF32 ? "f32 weights" : "native weights");
    absl::StatusOr<LoadedModel> each =
        LoadModel(model.Write(c.name).string(), {.weights = storage});
    ASSERT_TRUE(each.ok()) << each.status();
    EXPECT_EQ(each->weights->has_native(),
              storage == WeightStorage::kNative && c.spec.dtype != "F32");
    for (size_t count : {ids.size(), size_t{1}}) {
      absl::StatusOr<std::unique_ptr<ModelRunner>> runner = ModelRunner::Create(
          each->weights, {.backend = BackendKind::kCpu, .num_blocks = 16, .block_size = kBlock});
      ASSERT_TRUE(runner.ok()) << runner.status();
      const std::vector<TokenId> prefix(ids.begin(),
                                        ids.begin() + static_cast<std::ptrdiff_t>(count));
      const std::vector<int32_t> rows(all.begin(),
                                      all.begin() + static_cast<std::ptrdiff_t>(count));
      absl::StatusOr<std::vector<float>> logits = PrefillLogits(**runner, prefix, rows);
      ASSERT_TRUE(logits.ok()) << logits.status();
      ExpectNear(*logits, want, rows, c.name);
    }
  }
}

// Keeps every third row after layer 0's K/V write, so the runner compacts the residual stream
// (dim wide) and the rotated queries (heads * head_dim wide) to those rows.
class KeepEveryThirdRow final : public LayerHook {
 public:
  absl::Status AfterKvWrite(const LayerView& view,
                            std::optional<std::vector<int32_t>>* keep) override {
    if (view.layer != 0) return absl::OkStatus();
    keep->emplace();
    for (int32_t r = 0; r < static_cast<int32_t>(view.rows.size()); r += 3)
      keep->value().push_back(r);
    return absl::OkStatus();
  }
};

// A second pass over the same tokens that drops rows: the kept rows attend in later layers to the
// K/V the first pass left, so their logits are the reference's.
TEST_P(HfCheckpointTest, RowsKeptByALayerHookMatchTheReference) {
  const HfCase& c = GetParam();
  const HfTestModel model = MakeHfTestModel(c.spec, 17);
  absl::StatusOr<LoadedModel> loaded = LoadModel(model.Write(c.name + "_hook").string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner = ModelRunner::Create(
      loaded->weights, {.backend = BackendKind::kCpu, .num_blocks = 16, .block_size = kBlock});
  ASSERT_TRUE(runner.ok()) << runner.status();
  const std::vector<TokenId> ids = TestIds(c.spec.vocab);
  ASSERT_TRUE(PrefillLogits(**runner, ids, {}).ok());
  std::vector<int32_t> kept;
  for (int32_t t = 0; t < kTokens; t += 3) kept.push_back(t);
  KeepEveryThirdRow hook;
  absl::StatusOr<std::vector<float>> logits = PrefillLogits(**runner, ids, kept, &hook);
  ASSERT_TRUE(logits.ok()) << logits.status();
  ExpectNear(*logits, model.Logits(std::vector<int>(ids.begin(), ids.end())), kept, c.name);
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfCheckpointTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<HfCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace pagedkv
