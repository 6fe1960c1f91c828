// Copyright 2026 The pagedkv Authors.
//
// Hugging Face "dynamic" RoPE scaling past max_position_embeddings: each step rotates its
// sequence's new queries and keys with the base for that sequence's length after the step, and
// cached keys keep theirs (transformers' dynamic_rope_update with a KV cache). A test-made
// model runs a prompt longer than max_position_embeddings and decode steps, alone, chunked and
// batched with a short sequence, against the float64 reference of hf_test_model.h that updates
// the base the same way.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/backend.h"
#include "engine/model/runner/model_runner.h"
#include "engine/model/runner/step_rope.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_source.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;

constexpr int kBlock = 4, kMaxPos = 16, kBlocksPerSeq = 10;

HfTestSpec DynamicSpec() {
  HfTestSpec spec;
  spec.max_pos = kMaxPos;
  spec.rope_scaling = {{"rope_type", "dynamic"}, {"factor", 2.5}};
  return spec;
}

// One sequence's place in the runner: block table [first_block, first_block + kBlocksPerSeq).
struct Seq {
  std::vector<TokenId> tokens;  // every token, prompt and generated ones
  int32_t first_block = 0;
  int32_t done = 0;  // tokens whose K/V are cached
};

// Runs one step: for each sequence the tokens [done, end) with end = ends[i]; returns the
// logits of each step's last token, [seqs][vocab] flattened.
absl::StatusOr<std::vector<float>> Step(ModelRunner& runner, std::vector<Seq*> seqs,
                                        const std::vector<int32_t>& ends) {
  std::vector<TokenId> ids;
  std::vector<int32_t> positions, qsl = {0}, kv_lens, logits_rows;
  std::vector<int64_t> slots;
  std::vector<BlockId> table;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq& s = *seqs[i];
    for (int32_t t = s.done; t < ends[i]; ++t) {
      ids.push_back(s.tokens[static_cast<size_t>(t)]);
      positions.push_back(t);
      slots.push_back(int64_t{s.first_block + t / kBlock} * kBlock + t % kBlock);
    }
    qsl.push_back(static_cast<int32_t>(ids.size()));
    kv_lens.push_back(ends[i]);
    logits_rows.push_back(static_cast<int32_t>(ids.size()) - 1);
    for (int32_t b = 0; b < kBlocksPerSeq; ++b) table.push_back(s.first_block + b);
    s.done = ends[i];
  }
  ModelOutput out;
  absl::Status st = runner.Forward({.token_ids = ids,
                                    .positions = positions,
                                    .slot_mapping = slots,
                                    .query_start_loc = qsl,
                                    .kv_lens = kv_lens,
                                    .block_tables = table,
                                    .max_blocks_per_seq = kBlocksPerSeq,
                                    .logits_indices = logits_rows},
                                   {.return_logits = true}, &out);
  if (!st.ok()) return st;
  return out.logits;
}

// Row `row` of `got` ([rows][vocab]) against `want`, within 2e-4 of its scale.
void ExpectRowNear(const std::vector<float>& got, size_t row, const std::vector<double>& want,
                   const std::string& what) {
  const size_t V = want.size();
  ASSERT_GE(got.size(), (row + 1) * V);
  double scale = 1.0, worst = 0.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < V; ++i) worst = std::max(worst, std::abs(got[row * V + i] - want[i]));
  EXPECT_LE(worst, 2e-4 * scale) << what;
}

// Each case on the CPU backend and, where a device is visible, the CUDA one (the per-step
// frequencies are uploaded there).
class DynamicRopeTest : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BackendKind::kCuda && !CudaBackendAvailable()) {
      GTEST_SKIP() << "no CUDA backend (not built with CUDA or no device)";
    }
    model_ = std::make_unique<HfTestModel>(MakeHfTestModel(DynamicSpec(), 23));
    absl::StatusOr<LoadedModel> loaded = LoadModel(model_->Write("dynamic_rope").string());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    absl::StatusOr<std::unique_ptr<ModelRunner>> runner = ModelRunner::Create(
        loaded->weights, {.backend = GetParam(), .num_blocks = 32, .block_size = kBlock});
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = std::move(*runner);
  }
  static std::vector<TokenId> Tokens(int n, int salt) {
    std::vector<TokenId> ids(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) ids[static_cast<size_t>(t)] = (t * 37 + salt) % 64;
    return ids;
  }
  std::vector<std::vector<double>> Want(const Seq& s, const std::vector<size_t>& step_ends) {
    return model_->Logits(std::vector<int>(s.tokens.begin(), s.tokens.end()), step_ends);
  }
  std::unique_ptr<HfTestModel> model_;
  std::unique_ptr<ModelRunner> runner_;
};

TEST_P(DynamicRopeTest, TheScaledContextIsMaxPositionTimesFactor) {
  EXPECT_TRUE(RopeDependsOnStepLength(runner_->rope_config()));
  EXPECT_EQ(runner_->context_length(), 40);  // floor(16 * 2.5)
  EXPECT_NE(runner_->rope_config().Fingerprint().find("seq_len=per_step"), std::string::npos);
}

// A 24-token prompt (past the 16 of max_position_embeddings) in one step, then 16 decode steps
// to the scaled context's end: every token's frequencies are those of its step's length.
TEST_P(DynamicRopeTest, LongPromptThenDecodeMatchesTheReference) {
  Seq s{.tokens = Tokens(40, 5), .first_block = 0};
  std::vector<size_t> ends = {24};
  for (size_t e = 25; e <= 40; ++e) ends.push_back(e);
  const auto want = Want(s, ends);
  for (size_t e : ends) {
    absl::StatusOr<std::vector<float>> got = Step(*runner_, {&s}, {static_cast<int32_t>(e)});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectRowNear(*got, 0, want[e - 1], "step ending at " + std::to_string(e));
  }
}

// The reference is sensitive to the rule: one forward call over all 40 tokens, or the static
// base of max_position_embeddings, give other logits at the decode steps.
TEST_P(DynamicRopeTest, TheReferenceTellsTheRulesApart) {
  const std::vector<TokenId> tokens = Tokens(40, 5);
  const std::vector<int> ids(tokens.begin(), tokens.end());
  std::vector<size_t> ends = {24};
  for (size_t e = 25; e <= 40; ++e) ends.push_back(e);
  const auto stepwise = model_->Logits(ids, ends);
  const auto one_call = model_->Logits(ids, {40});
  const auto short_calls = model_->Logits(ids, {8, 16, 40});
  double diff_one = 0, diff_short = 0;
  for (size_t i = 0; i < stepwise[30].size(); ++i) {
    diff_one = std::max(diff_one, std::abs(stepwise[30][i] - one_call[30][i]));
    diff_short = std::max(diff_short, std::abs(stepwise[10][i] - short_calls[10][i]));
  }
  EXPECT_GT(diff_one, 1e-3);
  EXPECT_GT(diff_short, 1e-3);  // position 10: computed with length 24 vs 16 (default base)
}

// The prompt in chunks of 12 (lengths 12, then 24: only the second chunk is past the limit).
TEST_P(DynamicRopeTest, ChunkedPrefillUsesEachChunksLength) {
  Seq s{.tokens = Tokens(30, 9), .first_block = 0};
  const std::vector<size_t> ends = {12, 24, 25, 26, 27, 28, 29, 30};
  const auto want = Want(s, ends);
  for (size_t e : ends) {
    absl::StatusOr<std::vector<float>> got = Step(*runner_, {&s}, {static_cast<int32_t>(e)});
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectRowNear(*got, 0, want[e - 1], "step ending at " + std::to_string(e));
  }
}

// Three sequences in one batch: a long one, a short one (default base throughout) and another
// long one of another length; each gets its own frequencies.
TEST_P(DynamicRopeTest, BatchedSequencesEachUseTheirOwnLength) {
  Seq a{.tokens = Tokens(26, 5), .first_block = 0};
  Seq b{.tokens = Tokens(12, 11), .first_block = 10};
  Seq c{.tokens = Tokens(24, 3), .first_block = 20};
  const auto want_a = Want(a, {20, 21, 22, 23, 24, 25, 26});
  const auto want_b = Want(b, {6, 7, 8, 9, 10, 11, 12});
  const auto want_c = Want(c, {18, 19, 20, 21, 22, 23, 24});
  for (int step = 0; step < 7; ++step) {
    const std::vector<int32_t> ends = {20 + step, 6 + step, 18 + step};
    absl::StatusOr<std::vector<float>> got = Step(*runner_, {&a, &b, &c}, ends);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::string at = " at step " + std::to_string(step);
    ExpectRowNear(*got, 0, want_a[static_cast<size_t>(ends[0] - 1)], "a" + at);
    ExpectRowNear(*got, 1, want_b[static_cast<size_t>(ends[1] - 1)], "b" + at);
    ExpectRowNear(*got, 2, want_c[static_cast<size_t>(ends[2] - 1)], "c" + at);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DynamicRopeTest,
                         ::testing::Values(BackendKind::kCpu, BackendKind::kCuda),
                         [](const ::testing::TestParamInfo<BackendKind>& info) {
                           return std::string(info.param == BackendKind::kCpu ? "Cpu" : "Cuda");
                         });

// A fixed dynamic_seq_len keeps the old static rule: one base for every step.
TEST(DynamicRopeStaticTest, AFixedLengthIsStatic) {
  RopeConfig rope{.head_dim = 8, .scaling = RopeScaling::kDynamicNtk, .factor = 2.0};
  rope.max_position_embeddings = 16;
  EXPECT_TRUE(RopeDependsOnStepLength(rope));
  rope.dynamic_seq_len = 32;  // vLLM's choice: max_position_embeddings * factor
  EXPECT_FALSE(RopeDependsOnStepLength(rope));
  EXPECT_NE(rope.Fingerprint().find("seq_len=32"), std::string::npos);
  rope.scaling = RopeScaling::kLinear;
  rope.dynamic_seq_len = 0;
  EXPECT_FALSE(RopeDependsOnStepLength(rope));
}

}  // namespace
}  // namespace pagedkv
