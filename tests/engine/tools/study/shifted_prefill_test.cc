// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/shifted_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/model_runner.h"
#include "engine/tools/study/layer_prefix_weights.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 4;

ModelConfig TinyConfig() {
  return ModelConfig{.dim = 32,
                     .hidden_dim = 48,
                     .n_layers = 3,
                     .n_heads = 4,
                     .n_kv_heads = 2,
                     .vocab_size = 64,
                     .seq_len = 128};
}

std::vector<TokenId> RandomTokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TokenId> out(static_cast<size_t>(n));
  for (TokenId& t : out) t = static_cast<TokenId>(3 + rng() % 61);
  return out;
}

std::vector<TokenId> Concat(std::initializer_list<std::vector<TokenId>> parts) {
  std::vector<TokenId> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// One model runner, pool, chunk index and executor over `dtype` pages.
struct Rig {
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<ChunkIndex> index;
  std::unique_ptr<ShiftedPrefill> prefill;

  static Rig Make(DType dtype, int32_t num_blocks = 96,
                  std::optional<RopeConfig> rope = std::nullopt) {
    Rig rig;
    auto weights = std::make_shared<const ModelWeights>(
        ModelWeights::Random(TinyConfig(), {.seed = 5}).value());
    rig.runner = ModelRunner::Create(weights, {.backend = BackendKind::kCpu,
                                               .num_blocks = num_blocks,
                                               .block_size = kBlockSize,
                                               .kv_dtype = dtype,
                                               .rope = rope})
                     .value();
    rig.pool = BlockPool::Create({.num_blocks = num_blocks, .block_size = kBlockSize}).value();
    rig.index = ChunkIndex::Create(rig.pool.get()).value();
    rig.prefill = ShiftedPrefill::Create(rig.runner.get(), rig.pool.get(), rig.index.get()).value();
    return rig;
  }

  std::vector<BlockId> Table(int32_t tokens) {
    std::vector<BlockId> table;
    EXPECT_TRUE(pool->Allocate((tokens + kBlockSize - 1) / kBlockSize, &table).ok());
    return table;
  }

  void Free(const std::vector<BlockId>& table) {
    std::vector<BlockId> tail_first(table.rbegin(), table.rend());
    ASSERT_TRUE(pool->Unpin(tail_first).ok());
  }

  // K and V of layer `layer` at positions [begin, begin + n) of a sequence with `table`.
  std::pair<std::vector<float>, std::vector<float>> Kv(const std::vector<BlockId>& table,
                                                       int32_t layer, int32_t begin, int32_t n) {
    std::vector<int64_t> slots;
    for (int32_t p = begin; p < begin + n; ++p) {
      slots.push_back(int64_t{table[static_cast<size_t>(p / kBlockSize)]} * kBlockSize +
                      p % kBlockSize);
    }
    std::vector<float> k, v;
    EXPECT_TRUE(runner->ReadKv(layer, slots, &k, &v).ok());
    return {k, v};
  }
};

// Unit roundoff of the storage dtype.
double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return std::ldexp(1.0, -24);
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kInt8:  // half a step of a row quantized to +-127 (relative to its largest value)
    case DType::kQ8_0:
      return std::ldexp(1.0, -8);
    case DType::kFp8E4M3:  // 3 mantissa bits
    case DType::kQ4_0:     // half a step of +-8
    case DType::kQ4_1:
      return std::ldexp(1.0, -4);
    case DType::kFp8E5M2:  // 2 mantissa bits
      return std::ldexp(1.0, -3);
  }
  return 1.0;
}

// Re-rotated keys went through two roundings to the dtype (at p0, after re-rotation) and fp32
// trigonometry; fresh ones through one. Per rotated pair: |diff| <= (3u + 1e-6) * |pair|.
void ExpectKeysMatch(const std::vector<float>& got, const std::vector<float>& fresh, DType dtype,
                     const RopeConfig& rope) {
  ASSERT_EQ(got.size(), fresh.size());
  const double u = UnitRoundoff(dtype);
  const size_t hd = static_cast<size_t>(rope.head_dim);
  const size_t rd = static_cast<size_t>(rope.RotaryDim());
  for (size_t base = 0; base < fresh.size(); base += hd) {
    for (size_t d = 0; d < hd; ++d) {
      // The rotated pair d belongs to (d alone when it is not rotated).
      size_t mate = d;
      if (d < rd) {
        if (rope.layout == RopeLayout::kInterleaved) {
          mate = d ^ 1;
        } else {
          mate = d < rd / 2 ? d + rd / 2 : d - rd / 2;
        }
      }
      const double norm = std::hypot(double{fresh[base + d]}, double{fresh[base + mate]});
      const double tol =
          (3.0 * u + 1e-6) * (mate == d ? std::abs(double{fresh[base + d]}) : norm) + 1e-30;
      EXPECT_LE(std::abs(double{got[base + d]} - fresh[base + d]), tol) << "element " << base + d;
    }
  }
}

struct ShiftCase {
  int32_t p0;
  int32_t p1;
};

TEST(ShiftedPrefillTest, ReRotatedLayer0KeysMatchFreshForEveryDtypeAndAlignment) {
  const std::vector<TokenId> doc = RandomTokens(10, 1);
  // Aligned (p0, p1 multiples of the block size), unaligned, backwards, by one.
  const ShiftCase cases[] = {{4, 20}, {3, 22}, {21, 2}, {5, 6}, {0, 9}};
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const ShiftCase& c : cases) {
      SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " p0=" << c.p0 << " p1=" << c.p1);
      Rig rig = Rig::Make(dtype);
      const std::vector<TokenId> donor = Concat({RandomTokens(c.p0, 2), doc, {7}});
      const std::vector<TokenId> target = Concat({RandomTokens(c.p1, 3), doc, {9, 11}});
      const std::vector<ChunkSpan> donor_span = {{.begin = c.p0, .length = 10}};
      const std::vector<ChunkSpan> target_span = {{.begin = c.p1, .length = 10}};
      const std::vector<BlockId> donor_table = rig.Table(static_cast<int32_t>(donor.size()));
      auto first =
          rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {});
      ASSERT_TRUE(first.ok()) << first.status();
      EXPECT_FALSE(first->chunks[0].hit);
      EXPECT_TRUE(first->chunks[0].registered);
      rig.Free(donor_table);  // the chunk lives on in blocks of its own

      const std::vector<BlockId> table = rig.Table(static_cast<int32_t>(target.size()));
      auto reused =
          rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = table}, {});
      ASSERT_TRUE(reused.ok()) << reused.status();
      ASSERT_TRUE(reused->chunks[0].hit);
      EXPECT_EQ(reused->chunks[0].cached_position, c.p0);
      EXPECT_EQ(reused->num_reused_tokens, 10);
      EXPECT_EQ(reused->num_computed_tokens, static_cast<int64_t>(target.size()) - 10);
      EXPECT_LT(reused->compute_fraction, 1.0);

      const std::vector<BlockId> fresh_table = rig.Table(static_cast<int32_t>(target.size()));
      auto fresh =
          rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = fresh_table},
                           {.enable_reuse = false, .register_chunks = false});
      ASSERT_TRUE(fresh.ok()) << fresh.status();
      EXPECT_EQ(fresh->num_reused_tokens, 0);

      const auto [k, v] = rig.Kv(table, 0, c.p1, 10);
      const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, 0, c.p1, 10);
      ExpectKeysMatch(k, k_fresh, dtype, rig.runner->rope_config());
      EXPECT_EQ(v, v_fresh);  // layer-0 values depend on the token only: copied exactly
      // The chunk's blocks were pinned only while read.
      EXPECT_TRUE(rig.index->ValidateInvariants().ok());
      EXPECT_EQ(rig.pool->NumUsedBlocks(), static_cast<int32_t>(table.size() + fresh_table.size()));
    }
  }
}

// from_float_keys: a chunk registered with its float keys moves from them, so an int8 or bf16
// key is rounded once, as the fresh key is (equal to it but for the rare fp32 rounding of the
// rotation), where the move from the rounded key differs from it in many elements.
TEST(ShiftedPrefillTest, FloatKeysMoveAQuantizedKeyWithOneRounding) {
  const std::vector<TokenId> doc = RandomTokens(12, 4);
  for (DType dtype : {DType::kInt8, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    Rig rig = Rig::Make(dtype);
    const std::vector<TokenId> donor = Concat({RandomTokens(5, 2), doc, {7}});
    const std::vector<TokenId> target = Concat({RandomTokens(11, 3), doc, {9, 11}});
    const std::vector<ChunkSpan> donor_span = {{.begin = 5, .length = 12}};
    const std::vector<ChunkSpan> target_span = {{.begin = 11, .length = 12}};
    const std::vector<BlockId> donor_table = rig.Table(static_cast<int32_t>(donor.size()));
    ASSERT_TRUE(
        rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {})
            .ok());
    rig.Free(donor_table);
    const std::vector<BlockId> fresh_table = rig.Table(static_cast<int32_t>(target.size()));
    ASSERT_TRUE(rig.prefill
                    ->Run({.tokens = target, .chunks = target_span, .block_table = fresh_table},
                          {.enable_reuse = false, .register_chunks = false})
                    .ok());
    const std::vector<float> fresh = rig.Kv(fresh_table, 0, 11, 12).first;
    double equal[2] = {0, 0};
    for (const bool from_float_keys : {false, true}) {
      const std::vector<BlockId> table = rig.Table(static_cast<int32_t>(target.size()));
      auto reused =
          rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = table},
                           {.register_chunks = false, .from_float_keys = from_float_keys});
      ASSERT_TRUE(reused.ok()) << reused.status();
      ASSERT_TRUE(reused->chunks[0].hit);
      const auto [k, v] = rig.Kv(table, 0, 11, 12);
      const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, 0, 11, 12);
      EXPECT_EQ(v, v_fresh);  // values are copied as bytes either way
      for (size_t d = 0; d < k.size(); ++d) equal[from_float_keys] += k[d] == fresh[d];
      equal[from_float_keys] /= static_cast<double>(k.size());
      rig.Free(table);
    }
    EXPECT_GE(equal[1], 0.97);
    EXPECT_LT(equal[0], equal[1] - 0.1);
  }
}

// Re-rotation honours every RoPE variant the KV write uses (pair layout, partial rotary, scaling,
// YaRN's attention factor applied once): layer-0 keys still equal fresh ones.
TEST(ShiftedPrefillTest, ReRotationHonoursRopeVariants) {
  std::vector<RopeConfig> ropes;
  RopeConfig half{.head_dim = 8, .rotary_dim = 4, .base = 500.0, .layout = RopeLayout::kHalfSplit};
  ropes.push_back(half);
  RopeConfig yarn{.head_dim = 8,
                  .layout = RopeLayout::kHalfSplit,
                  .scaling = RopeScaling::kYarn,
                  .factor = 4.0,
                  .max_position_embeddings = 128,
                  .original_max_position_embeddings = 32};
  ropes.push_back(yarn);
  RopeConfig llama3{.head_dim = 8,
                    .base = 500000.0,
                    .layout = RopeLayout::kInterleaved,
                    .scaling = RopeScaling::kLlama3,
                    .factor = 8.0,
                    .max_position_embeddings = 128,
                    .original_max_position_embeddings = 16};
  ropes.push_back(llama3);
  RopeConfig linear{.head_dim = 8, .scaling = RopeScaling::kLinear, .factor = 2.0};
  ropes.push_back(linear);
  const std::vector<TokenId> doc = RandomTokens(9, 4);
  for (const RopeConfig& rope : ropes) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(testing::Message() << rope.Fingerprint() << " " << DTypeName(dtype));
      Rig rig = Rig::Make(dtype, 96, rope);
      const std::vector<TokenId> donor = Concat({RandomTokens(2, 5), doc, {3}});
      const std::vector<TokenId> target = Concat({RandomTokens(41, 6), doc, {4}});
      const std::vector<ChunkSpan> donor_span = {{.begin = 2, .length = 9}};
      const std::vector<ChunkSpan> target_span = {{.begin = 41, .length = 9}};
      const std::vector<BlockId> donor_table = rig.Table(12);
      ASSERT_TRUE(
          rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {})
              .ok());
      const std::vector<BlockId> table = rig.Table(51), fresh_table = rig.Table(51);
      auto run =
          rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = table}, {});
      ASSERT_TRUE(run.ok()) << run.status();
      ASSERT_EQ(run->num_reused_tokens, 9);
      ASSERT_TRUE(rig.prefill
                      ->Run({.tokens = target, .chunks = target_span, .block_table = fresh_table},
                            {.enable_reuse = false, .register_chunks = false})
                      .ok());
      const auto [k, v] = rig.Kv(table, 0, 41, 9);
      const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, 0, 41, 9);
      ExpectKeysMatch(k, k_fresh, dtype, rope);
      EXPECT_EQ(v, v_fresh);
    }
  }
}

// Two chunks in one prompt, in the other order than cached, the second ending the prompt: its
// last token is computed (the prompt's logits need it); everything else of both is reused.
TEST(ShiftedPrefillTest, SeveralChunksInOnePromptAndTheLastTokenIsComputed) {
  Rig rig = Rig::Make(DType::kF32);
  const std::vector<TokenId> d1 = RandomTokens(7, 11), d2 = RandomTokens(10, 12);
  const std::vector<TokenId> donor = Concat({RandomTokens(2, 13), d1, RandomTokens(3, 14), d2});
  const std::vector<ChunkSpan> donor_spans = {{.begin = 2, .length = 7},
                                              {.begin = 12, .length = 10}};
  const std::vector<BlockId> donor_table = rig.Table(22);
  auto first =
      rig.prefill->Run({.tokens = donor, .chunks = donor_spans, .block_table = donor_table}, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->chunks[0].registered);
  EXPECT_TRUE(first->chunks[1].registered);
  EXPECT_EQ(rig.index->size(), 2);

  const std::vector<TokenId> target = Concat({RandomTokens(5, 15), d2, RandomTokens(1, 16), d1});
  const std::vector<ChunkSpan> spans = {{.begin = 5, .length = 10}, {.begin = 16, .length = 7}};
  const std::vector<BlockId> table = rig.Table(23), fresh_table = rig.Table(23);
  auto run = rig.prefill->Run({.tokens = target, .chunks = spans, .block_table = table}, {});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->chunks[0].hit);
  ASSERT_TRUE(run->chunks[1].hit);
  EXPECT_EQ(run->chunks[0].cached_position, 12);
  EXPECT_EQ(run->chunks[1].cached_position, 2);
  EXPECT_EQ(run->chunks[0].num_reused, 10);
  EXPECT_EQ(run->chunks[1].num_reused, 6);
  EXPECT_EQ(run->chunks[1].num_recomputed, 1);
  EXPECT_EQ(run->num_computed_tokens, 23 - 16);
  EXPECT_EQ(run->logits.size(), static_cast<size_t>(TinyConfig().vocab_size));
  ASSERT_TRUE(rig.prefill
                  ->Run({.tokens = target, .chunks = spans, .block_table = fresh_table},
                        {.enable_reuse = false, .register_chunks = false})
                  .ok());
  for (const ChunkSpan& span : spans) {
    const auto [k, v] = rig.Kv(table, 0, span.begin, span.length);
    const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, 0, span.begin, span.length);
    ExpectKeysMatch(k, k_fresh, DType::kF32, rig.runner->rope_config());
  }
}

TEST(ShiftedPrefillTest, NaiveCopyLeavesKeysAtTheOldPosition) {
  Rig rig = Rig::Make(DType::kF32);
  const std::vector<TokenId> doc = RandomTokens(8, 1);
  const std::vector<TokenId> donor = Concat({RandomTokens(4, 2), doc, {7}});
  const std::vector<TokenId> target = Concat({RandomTokens(13, 3), doc, {9}});
  const std::vector<ChunkSpan> donor_span = {{.begin = 4, .length = 8}};
  const std::vector<ChunkSpan> target_span = {{.begin = 13, .length = 8}};
  const std::vector<BlockId> donor_table = rig.Table(static_cast<int32_t>(donor.size()));
  ASSERT_TRUE(
      rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {})
          .ok());
  const std::vector<BlockId> table = rig.Table(static_cast<int32_t>(target.size()));
  ASSERT_TRUE(rig.prefill
                  ->Run({.tokens = target, .chunks = target_span, .block_table = table},
                        {.rerotate = false})
                  .ok());
  // Naive keys equal the donor's keys (old rotation) exactly, and differ from fresh ones.
  const auto [k_naive, v_naive] = rig.Kv(table, 0, 13, 8);
  const auto [k_donor, v_donor] = rig.Kv(donor_table, 0, 4, 8);
  EXPECT_EQ(k_naive, k_donor);
  EXPECT_EQ(v_naive, v_donor);
  const std::vector<BlockId> fresh_table = rig.Table(static_cast<int32_t>(target.size()));
  ASSERT_TRUE(rig.prefill
                  ->Run({.tokens = target, .chunks = target_span, .block_table = fresh_table},
                        {.enable_reuse = false, .register_chunks = false})
                  .ok());
  const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, 0, 13, 8);
  double max_diff = 0.0;
  for (size_t e = 0; e < k_fresh.size(); ++e) {
    max_diff = std::max(max_diff, std::abs(double{k_naive[e]} - k_fresh[e]));
  }
  EXPECT_GT(max_diff, 1e-3);
}

// With p1 == p0 (same prefix) the shifted path must give exactly what prefix reuse gives.
TEST(ShiftedPrefillTest, NoShiftGivesOutputsIdenticalToPrefixReuse) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    Rig rig = Rig::Make(dtype);
    const std::vector<TokenId> prefix = RandomTokens(8, 1), doc = RandomTokens(8, 2),
                               tail = RandomTokens(6, 3);
    const std::vector<TokenId> donor = Concat({prefix, doc});
    const std::vector<TokenId> target = Concat({prefix, doc, tail});
    const std::vector<ChunkSpan> span = {{.begin = 8, .length = 8}};
    const std::vector<BlockId> donor_table = rig.Table(16);
    ASSERT_TRUE(
        rig.prefill->Run({.tokens = donor, .chunks = span, .block_table = donor_table}, {}).ok());

    // Prefix reuse: the target's table starts with the donor's 4 blocks; only the tail is run.
    std::vector<BlockId> prefix_table = donor_table;
    const std::vector<BlockId> extra = rig.Table(6);
    prefix_table.insert(prefix_table.end(), extra.begin(), extra.end());
    std::vector<int32_t> positions(6), rows(6);
    std::vector<int64_t> slots(6);
    for (int32_t i = 0; i < 6; ++i) {
      positions[static_cast<size_t>(i)] = 16 + i;
      rows[static_cast<size_t>(i)] = i;
      slots[static_cast<size_t>(i)] =
          int64_t{prefix_table[static_cast<size_t>((16 + i) / kBlockSize)]} * kBlockSize +
          (16 + i) % kBlockSize;
    }
    const std::vector<int32_t> qsl = {0, 6}, kv_lens = {22};
    ModelOutput prefix_out;
    ASSERT_TRUE(rig.runner
                    ->Forward({.token_ids = tail,
                               .positions = positions,
                               .slot_mapping = slots,
                               .query_start_loc = qsl,
                               .kv_lens = kv_lens,
                               .block_tables = prefix_table,
                               .max_blocks_per_seq = static_cast<int32_t>(prefix_table.size()),
                               .logits_indices = rows},
                              {.return_logits = true}, &prefix_out)
                    .ok());

    // Shifted reuse at the same position: the prefix is computed, the chunk copied, the tail run.
    const std::vector<BlockId> table = rig.Table(22);
    auto shifted = rig.prefill->Run(
        {.tokens = target, .chunks = span, .block_table = table, .logits_from = 16}, {});
    ASSERT_TRUE(shifted.ok()) << shifted.status();
    ASSERT_TRUE(shifted->chunks[0].hit);
    EXPECT_EQ(shifted->num_reused_tokens, 8);
    EXPECT_EQ(shifted->logits, prefix_out.logits) << DTypeName(dtype);
  }
}

TEST(ShiftedPrefillTest, EvictedChunkIsRecomputedNeverRead) {
  Rig rig = Rig::Make(DType::kF32, /*num_blocks=*/24);
  const std::vector<TokenId> doc = RandomTokens(8, 1);
  const std::vector<TokenId> donor = Concat({RandomTokens(3, 2), doc, {5}});
  const std::vector<TokenId> target = Concat({RandomTokens(6, 3), doc, {9}});
  const std::vector<ChunkSpan> donor_span = {{.begin = 3, .length = 8}};
  const std::vector<ChunkSpan> target_span = {{.begin = 6, .length = 8}};
  const std::vector<BlockId> donor_table = rig.Table(12);
  ASSERT_TRUE(
      rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {})
          .ok());
  rig.Free(donor_table);
  ASSERT_EQ(rig.index->size(), 1);
  // Another user takes every block: the chunk's blocks are evicted.
  std::vector<BlockId> hog;
  ASSERT_TRUE(rig.pool->Allocate(rig.pool->NumAvailableBlocks(), &hog).ok());
  EXPECT_EQ(rig.index->size(), 0);
  rig.Free(std::vector<BlockId>(hog.begin() + 8, hog.end()));
  hog.resize(8);
  const std::vector<BlockId> table = rig.Table(15);
  auto run = rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = table},
                              {.register_chunks = false});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->chunks[0].hit);
  EXPECT_EQ(run->num_reused_tokens, 0);
  const std::vector<BlockId> fresh_table = rig.Table(15);
  auto fresh =
      rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = fresh_table},
                       {.enable_reuse = false, .register_chunks = false});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(run->logits, fresh->logits);
  EXPECT_TRUE(rig.index->ValidateInvariants().ok());
}

TEST(ShiftedPrefillTest, FirstKRecomputeMatchesFreshOnThoseTokens) {
  Rig rig = Rig::Make(DType::kF32);
  const std::vector<TokenId> doc = RandomTokens(12, 1);
  const std::vector<TokenId> donor = Concat({RandomTokens(2, 2), doc, {5}});
  const std::vector<TokenId> target = Concat({RandomTokens(9, 3), doc, {9, 10}});
  const std::vector<BlockId> donor_table = rig.Table(15);
  const std::vector<ChunkSpan> donor_span = {{.begin = 2, .length = 12}};
  const std::vector<ChunkSpan> target_span = {{.begin = 9, .length = 12}};
  ASSERT_TRUE(
      rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {})
          .ok());
  const std::vector<BlockId> table = rig.Table(23);
  auto run = rig.prefill->Run({.tokens = target, .chunks = target_span, .block_table = table},
                              {.recompute_first = 3});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->num_reused_tokens, 9);
  EXPECT_EQ(run->chunks[0].num_recomputed, 3);
  EXPECT_EQ(run->num_computed_tokens, 23 - 9);
  const std::vector<BlockId> fresh_table = rig.Table(23);
  ASSERT_TRUE(rig.prefill
                  ->Run({.tokens = target, .chunks = target_span, .block_table = fresh_table},
                        {.enable_reuse = false, .register_chunks = false})
                  .ok());
  // The first 3 chunk tokens see only fresh context: their K/V equal fresh at every layer.
  for (int32_t layer = 0; layer < TinyConfig().n_layers; ++layer) {
    const auto [k, v] = rig.Kv(table, layer, 9, 3);
    const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, layer, 9, 3);
    for (size_t e = 0; e < k.size(); ++e) {
      EXPECT_NEAR(k[e], k_fresh[e], 1e-5 * (1.0 + std::abs(k_fresh[e]))) << layer;
      EXPECT_NEAR(v[e], v_fresh[e], 1e-5 * (1.0 + std::abs(v_fresh[e]))) << layer;
    }
  }
}

// Selective recompute picks exactly the tokens whose layer-1 K/V deviate most from fresh ones.
TEST(ShiftedPrefillTest, SelectiveRecomputePicksLargestDeviation) {
  Rig rig = Rig::Make(DType::kF32);
  const std::vector<TokenId> doc = RandomTokens(16, 1);
  const std::vector<TokenId> donor = Concat({RandomTokens(3, 2), doc, {5}});
  const std::vector<TokenId> target = Concat({RandomTokens(10, 3), doc, {9}});
  const std::vector<ChunkSpan> donor_span = {{.begin = 3, .length = 16}};
  const std::vector<ChunkSpan> target_span = {{.begin = 10, .length = 16}};
  const std::vector<BlockId> donor_table = rig.Table(20);
  ASSERT_TRUE(
      rig.prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {})
          .ok());
  const ShiftedPrefillInput base{.tokens = target, .chunks = target_span};
  // Brute force: deviation of plain re-rotated K/V from fresh K/V at layer 1.
  const std::vector<BlockId> plain_table = rig.Table(27), fresh_table = rig.Table(27),
                             table = rig.Table(27);
  ShiftedPrefillInput in = base;
  in.block_table = plain_table;
  ASSERT_TRUE(rig.prefill->Run(in, {.register_chunks = false}).ok());
  in.block_table = fresh_table;
  ASSERT_TRUE(rig.prefill->Run(in, {.enable_reuse = false, .register_chunks = false}).ok());
  const auto [k_plain, v_plain] = rig.Kv(plain_table, 1, 10, 16);
  const auto [k_fresh, v_fresh] = rig.Kv(fresh_table, 1, 10, 16);
  const size_t width = k_plain.size() / 16;
  std::vector<std::pair<double, int>> dev;
  for (int j = 0; j < 16; ++j) {
    double sum = 0.0;
    for (size_t e = static_cast<size_t>(j) * width; e < static_cast<size_t>(j + 1) * width; ++e) {
      sum += std::pow(double{k_plain[e]} - k_fresh[e], 2) +
             std::pow(double{v_plain[e]} - v_fresh[e], 2);
    }
    dev.emplace_back(-sum, j);
  }
  std::sort(dev.begin(), dev.end());
  std::set<int> expected;
  for (int j = 0; j < 4; ++j) expected.insert(dev[static_cast<size_t>(j)].second);  // 25% of 16

  in.block_table = table;
  auto run = rig.prefill->Run(in, {.recompute_fraction = 0.25, .register_chunks = false});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->num_reused_tokens, 12);
  EXPECT_EQ(run->probe_layers, 2);
  EXPECT_EQ(run->num_probe_tokens, 16);  // the chunk only: the prefix KV is copied in
  EXPECT_NEAR(run->compute_fraction, (15.0 * 3 + 12.0 * 2) / (27.0 * 3), 1e-12);
  // Reused tokens keep exactly the plain re-rotated K/V; recomputed ones do not.
  const auto [k_sel, v_sel] = rig.Kv(table, 1, 10, 16);
  std::set<int> recomputed;
  for (int j = 0; j < 16; ++j) {
    const auto b = k_sel.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(j) * width);
    const auto p = k_plain.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(j) * width);
    if (!std::equal(b, b + static_cast<std::ptrdiff_t>(width), p)) recomputed.insert(j);
  }
  EXPECT_EQ(recomputed, expected);
}

TEST(ShiftedPrefillTest, BadInputChangesNothing) {
  Rig rig = Rig::Make(DType::kF32);
  const std::vector<TokenId> doc = RandomTokens(8, 1);
  const std::vector<TokenId> donor = Concat({RandomTokens(3, 2), doc, {5}});
  const std::vector<BlockId> donor_table = rig.Table(12);
  const std::vector<ChunkSpan> span = {{.begin = 3, .length = 8}};
  ASSERT_TRUE(
      rig.prefill->Run({.tokens = donor, .chunks = span, .block_table = donor_table}, {}).ok());
  const int32_t used = rig.pool->NumUsedBlocks();
  const std::vector<ChunkSpan> overlapping = {{.begin = 0, .length = 4}, {.begin = 3, .length = 2}};
  const std::vector<ChunkSpan> outside = {{.begin = 10, .length = 4}};
  const std::vector<BlockId> short_table = {donor_table[0]};
  const std::vector<TokenId> bad_tokens = Concat({RandomTokens(3, 2), {64}});
  auto code = [&](const ShiftedPrefillInput& in, const ShiftedReuseOptions& o) {
    return rig.prefill->Run(in, o).status().code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code({.tokens = donor, .chunks = overlapping, .block_table = donor_table}, {}), kBad);
  EXPECT_EQ(code({.tokens = donor, .chunks = outside, .block_table = donor_table}, {}), kBad);
  EXPECT_EQ(code({.tokens = donor, .chunks = span, .block_table = short_table}, {}), kBad);
  EXPECT_EQ(code({.tokens = bad_tokens, .block_table = donor_table}, {}), kBad);
  EXPECT_EQ(code({.tokens = donor, .block_table = donor_table, .logits_from = 12}, {}), kBad);
  EXPECT_EQ(code({.tokens = donor, .chunks = span, .block_table = donor_table},
                 {.recompute_fraction = 1.5}),
            kBad);
  EXPECT_EQ(code({.tokens = {}, .block_table = donor_table}, {}), kBad);
  EXPECT_EQ(rig.pool->NumUsedBlocks(), used);
  EXPECT_EQ(rig.index->size(), 1);
  EXPECT_TRUE(rig.index->ValidateInvariants().ok());
}

TEST(LayerPrefixWeightsTest, KeepsTheFirstLayers) {
  const ModelWeights full = ModelWeights::Random(TinyConfig(), {.seed = 3}).value();
  const ModelWeights two = LayerPrefixWeights(full, 2).value();
  EXPECT_EQ(two.config().n_layers, 2);
  const int64_t d = TinyConfig().dim;
  for (int l = 0; l < 2; ++l) {
    EXPECT_TRUE(std::equal(full.layer(l).wq, full.layer(l).wq + d * d, two.layer(l).wq));
    EXPECT_TRUE(std::equal(full.layer(l).w2, full.layer(l).w2 + d * TinyConfig().hidden_dim,
                           two.layer(l).w2));
  }
  EXPECT_TRUE(std::equal(full.rms_final(), full.rms_final() + d, two.rms_final()));
  EXPECT_EQ(LayerPrefixWeights(full, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LayerPrefixWeights(full, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
