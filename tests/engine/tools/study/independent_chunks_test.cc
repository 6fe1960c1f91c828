// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/independent_chunks.h"

#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {
namespace {

std::shared_ptr<const ModelWeights> SmallModel() {
  return std::make_shared<const ModelWeights>(
      ModelWeights::Random({.dim = 32,
                            .hidden_dim = 48,
                            .n_layers = 3,
                            .n_heads = 4,
                            .n_kv_heads = 2,
                            .vocab_size = 64,
                            .seq_len = 96},
                           {.seed = 5, .embedding_scale = 0.1f})
          .value());
}

ChunksStudyOptions SmallOptions() {
  ChunksStudyOptions o;
  o.weights = SmallModel();
  o.block_size = 4;
  o.chunk_counts = {3};
  o.chunk_length = 8;
  o.system_prefix = 2;
  o.continuation_length = 6;
  o.num_documents = 2;
  return o;
}

// A prompt of deterministic tokens: S ‖ C1..Ck ‖ Q.
ChunkedPrompt MakePrompt(const ChunksStudyOptions& o, int32_t num_chunks) {
  ChunkedPrompt prompt{
      .system_prefix = o.system_prefix, .chunk_length = o.chunk_length, .num_chunks = num_chunks};
  const int32_t n = o.system_prefix + num_chunks * o.chunk_length + o.continuation_length;
  for (int32_t t = 0; t < n; ++t) prompt.tokens.push_back(t == 0 ? 1 : (t * 37 + 11) % 64);
  return prompt;
}

struct Fixture {
  ChunksStudyOptions options = SmallOptions();
  ChunkedPrompt prompt = MakePrompt(options, 3);
  std::unique_ptr<IndependentChunksRig> rig;
  std::vector<float> reference;
};

Fixture Prepared() {
  Fixture f;
  f.rig = IndependentChunksRig::Create(f.options.weights, f.options, f.prompt.size(), 3).value();
  EXPECT_TRUE(f.rig->PrefillDonors(f.prompt).ok());
  f.reference = f.rig->PrefillReference(f.prompt).value();
  return f;
}

constexpr ChunkVariant kSelectors[] = {ChunkVariant::kDeviation, ChunkVariant::kOracle,
                                       ChunkVariant::kRandom, ChunkVariant::kFirstK,
                                       ChunkVariant::kCacheBlend};

TEST(IndependentChunksTest, FractionOneIsExactlyTheFullPrefillForEverySelector) {
  Fixture f = Prepared();
  for (ChunkVariant variant : kSelectors) {
    absl::StatusOr<ChunkVariantResult> result = f.rig->RunVariant(f.prompt, variant, 1.0, 7);
    ASSERT_TRUE(result.ok()) << ChunkVariantName(variant) << ": " << result.status();
    EXPECT_EQ(result->logits, f.reference) << ChunkVariantName(variant);
    EXPECT_EQ(result->recomputed.size(), 24u) << ChunkVariantName(variant);
  }
}

TEST(IndependentChunksTest, FractionZeroIsReRotatedReuse) {
  Fixture f = Prepared();
  const std::vector<float> rerotated =
      f.rig->RunVariant(f.prompt, ChunkVariant::kReRotated, 0.0, 7).value().logits;
  EXPECT_NE(rerotated, f.reference);  // the chunks' contexts changed
  // CacheBlend's code recomputes layers 0-1 of every chunk token even at fraction 0.
  for (ChunkVariant variant : {ChunkVariant::kDeviation, ChunkVariant::kOracle,
                               ChunkVariant::kRandom, ChunkVariant::kFirstK}) {
    absl::StatusOr<ChunkVariantResult> result = f.rig->RunVariant(f.prompt, variant, 0.0, 7);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->logits, rerotated) << ChunkVariantName(variant);
    EXPECT_TRUE(result->recomputed.empty());
  }
  const ChunkVariantResult blend =
      f.rig->RunVariant(f.prompt, ChunkVariant::kCacheBlend, 0.0, 7).value();
  EXPECT_TRUE(blend.recomputed.empty());
  // S and Q through 3 layers, the 24 chunk tokens through layers 0 and 1.
  EXPECT_NEAR(blend.compute_fraction, ((2.0 + 6.0) * 3 + 24.0 * 2) / (32.0 * 3), 1e-12);
}

// The floatkeys variant moves the donors' float keys: on f32 pages they are the pages' keys, so
// it is re-rotated reuse bit for bit; on int8 pages it differs (one rounding instead of two) and
// saves the same compute.
TEST(IndependentChunksTest, FloatKeysVariantIsReRotationOnF32Pages) {
  for (DType dtype : {DType::kF32, DType::kInt8}) {
    SCOPED_TRACE(DTypeName(dtype));
    ChunksStudyOptions o = SmallOptions();
    o.kv_dtype = dtype;
    o.variants = {ChunkVariant::kReRotated, ChunkVariant::kFloatKeys};
    const ChunkedPrompt prompt = MakePrompt(o, 3);
    auto rig = IndependentChunksRig::Create(o.weights, o, prompt.size(), 3).value();
    ASSERT_TRUE(rig->PrefillDonors(prompt).ok());
    const ChunkVariantResult rerotated =
        rig->RunVariant(prompt, ChunkVariant::kReRotated, 0.0, 7).value();
    absl::StatusOr<ChunkVariantResult> float_keys =
        rig->RunVariant(prompt, ChunkVariant::kFloatKeys, 0.0, 7);
    ASSERT_TRUE(float_keys.ok()) << float_keys.status();
    EXPECT_EQ(float_keys->compute_fraction, rerotated.compute_fraction);
    EXPECT_TRUE(float_keys->recomputed.empty());
    if (dtype == DType::kF32) {
      EXPECT_EQ(float_keys->logits, rerotated.logits);
    } else {
      EXPECT_NE(float_keys->logits, rerotated.logits);
    }
  }
  EXPECT_EQ(ParseChunkVariant("floatkeys").value(), ChunkVariant::kFloatKeys);
}

TEST(IndependentChunksTest, IndependentChunkPrefillEqualsTheChunkAlone) {
  for (int32_t system_prefix : {0, 2}) {
    Fixture f;
    f.options.system_prefix = system_prefix;
    f.prompt = MakePrompt(f.options, 3);
    f.rig = IndependentChunksRig::Create(f.options.weights, f.options, f.prompt.size(), 3).value();
    ASSERT_TRUE(f.rig->PrefillDonors(f.prompt).ok());
    for (int32_t c = 0; c < 3; ++c) {
      // S ‖ Ci as a prompt of its own, prefilled fully on a second rig.
      ChunkedPrompt alone{.system_prefix = system_prefix, .chunk_length = 8, .num_chunks = 1};
      alone.tokens.assign(f.prompt.tokens.begin(), f.prompt.tokens.begin() + system_prefix);
      alone.tokens.insert(alone.tokens.end(), f.prompt.tokens.begin() + f.prompt.ChunkBegin(c),
                          f.prompt.tokens.begin() + f.prompt.ChunkBegin(c) + 8);
      alone.tokens.insert(alone.tokens.end(), {3, 4});
      auto other = IndependentChunksRig::Create(f.options.weights, f.options, alone.size(), 1);
      ASSERT_TRUE(other.ok());
      ASSERT_TRUE((*other)->PrefillReference(alone).ok());
      for (int32_t layer = 0; layer < 3; ++layer) {
        std::vector<float> k, v, k_alone, v_alone;
        ASSERT_TRUE(f.rig->runner().ReadKv(layer, f.rig->DonorSlots(f.prompt, c), &k, &v).ok());
        ASSERT_TRUE((*other)
                        ->runner()
                        .ReadKv(layer,
                                (*other)->PromptSlots(IndependentChunksRig::Copy::kReference,
                                                      system_prefix, 8),
                                &k_alone, &v_alone)
                        .ok());
        EXPECT_EQ(k, k_alone) << "chunk " << c << " layer " << layer;
        EXPECT_EQ(v, v_alone) << "chunk " << c << " layer " << layer;
      }
    }
  }
}

TEST(IndependentChunksTest, FirstKSelectsTheFirstTokensOfEachChunk) {
  const ChunkedPrompt prompt{.tokens = std::vector<TokenId>(25, 1),
                             .system_prefix = 2,
                             .chunk_length = 5,
                             .num_chunks = 3};
  EXPECT_EQ(FirstKTokens(prompt, 2), (std::vector<int32_t>{2, 3, 7, 8, 12, 13}));
  EXPECT_EQ(FirstKTokens(prompt, 0), std::vector<int32_t>{});
  EXPECT_EQ(FirstKTokens(prompt, 9).size(), 15u);  // clamped to the chunk
}

TEST(IndependentChunksTest, RandomTokensAreDistinctChunkTokensAndSeeded) {
  const ChunkedPrompt prompt{.tokens = std::vector<TokenId>(25, 1),
                             .system_prefix = 2,
                             .chunk_length = 5,
                             .num_chunks = 3};
  const std::vector<int32_t> a = RandomChunkTokens(prompt, 6, 42);
  ASSERT_EQ(a.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_GE(a[i], 2);
    EXPECT_LT(a[i], 17);
    if (i > 0) {
      EXPECT_LT(a[i - 1], a[i]);
    }
  }
  EXPECT_EQ(RandomChunkTokens(prompt, 6, 42), a);
  EXPECT_EQ(RandomChunkTokens(prompt, 15, 1).size(), 15u);
}

TEST(IndependentChunksTest, StudyRowsAreConsistentAndTheOracleBeatsRandom) {
  ChunksStudyOptions o = SmallOptions();
  o.chunk_counts = {2, 3};
  o.fractions = {0.0, 0.25, 0.5, 1.0};
  absl::StatusOr<ChunksStudyReport> report = RunChunksStudy(o);
  ASSERT_TRUE(report.ok()) << report.status();
  // Per chunk count: full, naive, rerotated, then 5 selectors x 4 fractions.
  ASSERT_EQ(report->rows.size(), 2u * (3 + 5 * 4));
  double oracle_kl = 0.0, random_kl = 0.0;
  for (const ChunksQualityRow& row : report->rows) {
    EXPECT_EQ(row.rows, int64_t{o.num_documents} * o.continuation_length);
    if (row.variant == "full" || row.fraction == 1.0) {
      EXPECT_EQ(row.mean_kl, 0.0) << row.variant;
    }
    if (row.variant == "rerotated") {
      const double n = o.system_prefix + row.num_chunks * 8.0 + o.continuation_length;
      EXPECT_NEAR(row.compute_saved, row.num_chunks * 8.0 / n, 1e-12);
    }
    if (row.variant == "oracle" && row.fraction > 0 && row.fraction < 1) oracle_kl += row.mean_kl;
    if (row.variant == "random" && row.fraction > 0 && row.fraction < 1) random_kl += row.mean_kl;
  }
  // Fixed seeds: deterministic. The oracle recomputes the tokens whose K/V are most wrong.
  EXPECT_LE(oracle_kl, random_kl);
}

TEST(IndependentChunksTest, BadOptionsAreInvalidArgument) {
  const auto code = [](const ChunksStudyOptions& o) { return RunChunksStudy(o).status().code(); };
  ChunksStudyOptions o = SmallOptions();
  o.chunk_counts = {0};
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.fractions = {0.5, 1.5};
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.deviation_layer = 3;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.chunk_counts = {12};  // 2 + 96 + 6 positions > 96
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.weights = nullptr;
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  o = SmallOptions();
  o.variants.clear();
  EXPECT_EQ(code(o), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseChunkVariant("bogus").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseChunkVariant("cacheblend"), ChunkVariant::kCacheBlend);
}

}  // namespace
}  // namespace pagedkv
