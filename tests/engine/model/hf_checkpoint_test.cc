// Copyright 2026 The pagedkv Authors.
//
// Test-made Hugging Face directories (random weights, every supported architecture and option)
// loaded through LoadModel and run by the ModelRunner, against a float64 reference forward pass
// at every position (tests/engine/model/hf_test_model.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/model_runner.h"
#include "gtest/gtest.h"
#include "pagedkv/model_source.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;

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

TEST_P(HfCheckpointTest, LogitsMatchFloat64ReferenceAtEveryPosition) {
  const HfCase& c = GetParam();
  const HfTestModel model = MakeHfTestModel(c.spec, 17);
  absl::StatusOr<LoadedModel> loaded = LoadModel(model.Write(c.name).string());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->format, "huggingface");
  EXPECT_EQ(loaded->weights->config().stop_token_ids, std::vector<int32_t>({2, 3}));
  constexpr int kBlock = 4, kTokens = 40;
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner = ModelRunner::Create(
      loaded->weights, {.backend = BackendKind::kCpu, .num_blocks = 16, .block_size = kBlock});
  ASSERT_TRUE(runner.ok()) << runner.status();
  std::vector<TokenId> ids(kTokens);
  for (int t = 0; t < kTokens; ++t) ids[static_cast<size_t>(t)] = (t * 37 + 5) % c.spec.vocab;
  std::vector<int32_t> positions(kTokens), logits_rows(kTokens);
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(logits_rows.begin(), logits_rows.end(), 0);
  std::vector<int64_t> slots(kTokens);
  std::iota(slots.begin(), slots.end(), int64_t{0});
  std::vector<BlockId> table(kTokens / kBlock);
  std::iota(table.begin(), table.end(), 0);
  const std::vector<int32_t> qsl = {0, kTokens}, kv_lens = {kTokens};
  ModelOutput out;
  absl::Status st = (*runner)->Forward({.token_ids = ids,
                                        .positions = positions,
                                        .slot_mapping = slots,
                                        .query_start_loc = qsl,
                                        .kv_lens = kv_lens,
                                        .block_tables = table,
                                        .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                                        .logits_indices = logits_rows},
                                       {.return_logits = true}, &out);
  ASSERT_TRUE(st.ok()) << st;
  const std::vector<std::vector<double>> want =
      model.Logits(std::vector<int>(ids.begin(), ids.end()));
  const size_t V = static_cast<size_t>(c.spec.vocab);
  ASSERT_EQ(out.logits.size(), want.size() * V);
  for (size_t t = 0; t < want.size(); ++t) {
    double scale = 1.0, worst = 0.0;
    for (double w : want[t]) scale = std::max(scale, std::abs(w));
    for (size_t i = 0; i < V; ++i)
      worst = std::max(worst, std::abs(out.logits[t * V + i] - want[t][i]));
    EXPECT_LE(worst, 2e-4 * scale) << c.name << " position " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfCheckpointTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<HfCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace pagedkv
