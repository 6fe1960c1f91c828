// Copyright 2026 The pagedkv Authors.
//
// CacheBlend's selective recompute: CacheBlendHook on the model runner (a LayerHook)
// against a brute-force deviation ranking, and the Engine's chunk_reuse.recompute_fraction
// against full recompute (fraction 1) and plain re-rotated reuse (fraction 0).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/shift/cache_blend_hook.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kVocab = 64;

std::shared_ptr<const ModelWeights> TinyWeights(const TinyShape& shape, uint32_t seed,
                                                const std::string& name) {
  const auto path = WriteTempFile(name, MakeTinyLlama2c(shape, seed).FileBytes());
  absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
  EXPECT_TRUE(w.ok()) << w.status();
  return std::make_shared<const ModelWeights>(std::move(w).value());
}

std::vector<TokenId> RandomTokens(std::mt19937& rng, int n) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % (kVocab - 3));
  return t;
}

// ---- ModelRunner blend groups ------------------------------------------------------------------

// One sequence of kLen tokens in blocks 0..; a chunk at rows [kChunkBegin, kChunkEnd) whose KV is
// re-rotated from a copy computed alone at positions 0.. in blocks 20.. .
constexpr int32_t kLen = 24, kChunkBegin = 8, kChunkEnd = 20, kChunkLen = kChunkEnd - kChunkBegin;
constexpr int32_t kLayers = 3;

struct BlendRig {
  std::unique_ptr<ModelRunner> runner;  // gets the re-rotated chunk, then the blend pass
  std::unique_ptr<ModelRunner> fresh;   // computes the whole sequence plainly
  std::vector<TokenId> tokens;
  std::vector<BlockId> table;
};

absl::Status Forward(ModelRunner& runner, std::span<const TokenId> all, int32_t begin, int32_t end,
                     int32_t position_offset, std::span<const BlockId> table, ModelOutput* out,
                     std::span<const BlendGroup> groups = {}, int32_t blend_layer = 0,
                     bool logits = false, std::vector<int32_t>* kept_rows = nullptr) {
  std::vector<TokenId> ids;
  std::vector<int32_t> positions;
  std::vector<int64_t> slots;
  for (int32_t t = begin; t < end; ++t) {
    const int32_t p = t - position_offset;
    ids.push_back(all[static_cast<size_t>(t)]);
    positions.push_back(p);
    slots.push_back(int64_t{table[static_cast<size_t>(p / kBlockSize)]} * kBlockSize +
                    p % kBlockSize);
  }
  const std::vector<int32_t> qsl = {0, end - begin}, kv_lens = {end - position_offset};
  std::vector<int32_t> rows;
  if (logits) rows.push_back(end - begin - 1);
  const ModelInput in{.token_ids = ids,
                      .positions = positions,
                      .slot_mapping = slots,
                      .query_start_loc = qsl,
                      .kv_lens = kv_lens,
                      .block_tables = absl::MakeConstSpan(table.data(), table.size()),
                      .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                      .logits_indices = rows};
  CacheBlendHook hook(absl::MakeConstSpan(groups.data(), groups.size()), blend_layer);
  const absl::Status status =
      runner.Forward(in, {.return_logits = logits, .hook = groups.empty() ? nullptr : &hook}, out);
  if (kept_rows != nullptr) *kept_rows = hook.kept_rows();
  return status;
}

std::vector<int64_t> ChunkSlots(const std::vector<BlockId>& table) {
  std::vector<int64_t> slots;
  for (int32_t p = kChunkBegin; p < kChunkEnd; ++p) {
    slots.push_back(int64_t{table[static_cast<size_t>(p / kBlockSize)]} * kBlockSize +
                    p % kBlockSize);
  }
  return slots;
}

BlendRig MakeBlendRig(DType kv_dtype = DType::kF32) {
  TinyShape shape;
  shape.n_layers = kLayers;
  auto weights = TinyWeights(shape, 77, "blend_runner_model.bin");
  BlendRig rig;
  ModelRunnerOptions options{
      .backend = BackendKind::kCpu, .num_blocks = 32, .block_size = 4, .kv_dtype = kv_dtype};
  rig.runner = ModelRunner::Create(weights, options).value();
  rig.fresh = ModelRunner::Create(weights, options).value();
  std::mt19937 rng(5);
  rig.tokens = RandomTokens(rng, kLen);
  for (BlockId b = 0; b < kLen / kBlockSize; ++b) rig.table.push_back(b);
  ModelOutput out;
  // The prefix, then the chunk alone at positions 0.. in blocks 20.., re-rotated into place.
  EXPECT_TRUE(Forward(*rig.runner, rig.tokens, 0, kChunkBegin, 0, rig.table, &out).ok());
  const std::vector<BlockId> alone = {20, 21, 22};
  EXPECT_TRUE(
      Forward(*rig.runner, rig.tokens, kChunkBegin, kChunkEnd, kChunkBegin, alone, &out).ok());
  std::vector<int64_t> src;
  std::vector<int32_t> old_pos, new_pos;
  for (int32_t i = 0; i < kChunkLen; ++i) {
    src.push_back(int64_t{alone[static_cast<size_t>(i / kBlockSize)]} * kBlockSize +
                  i % kBlockSize);
    old_pos.push_back(i);
    new_pos.push_back(kChunkBegin + i);
  }
  const std::vector<int64_t> dst = ChunkSlots(rig.table);
  EXPECT_TRUE(
      ReRotateSlots(*rig.runner,
                    {.src = src, .dst = dst, .old_positions = old_pos, .new_positions = new_pos})
          .ok());
  EXPECT_TRUE(Forward(*rig.fresh, rig.tokens, 0, kChunkEnd, 0, rig.table, &out).ok());
  return rig;
}

struct Kv {
  std::vector<float> k, v;
};

Kv Read(ModelRunner& runner, int32_t layer, std::span<const int64_t> slots) {
  Kv kv;
  EXPECT_TRUE(
      runner.ReadKv(layer, absl::MakeConstSpan(slots.data(), slots.size()), &kv.k, &kv.v).ok());
  return kv;
}

// Brute force: rows of the `keep` largest sum((ka-kb)^2 + (va-vb)^2), ties to the lower row.
std::vector<int32_t> BruteForceTop(const Kv& a, const Kv& b, size_t rows, int32_t keep) {
  const size_t width = a.k.size() / rows;
  std::vector<double> dev(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t e = r * width; e < (r + 1) * width; ++e) {
      dev[r] += std::pow(double{a.k[e]} - b.k[e], 2) + std::pow(double{a.v[e]} - b.v[e], 2);
    }
  }
  std::vector<int32_t> picked;
  std::vector<char> used(rows, 0);
  for (int32_t n = 0; n < keep; ++n) {
    size_t best = rows;
    for (size_t r = 0; r < rows; ++r) {
      if (!used[r] && (best == rows || dev[r] > dev[best])) best = r;
    }
    used[best] = 1;
    picked.push_back(static_cast<int32_t>(best));
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, double tol,
                const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " element " << i;
}

TEST(ModelRunnerBlendTest, KeepsTheMostDeviatingRowsAndLeavesTheOthersKvAboveTheLayer) {
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    for (int32_t keep : {0, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << "layer " << layer << " keep " << keep);
      BlendRig rig = MakeBlendRig();
      const std::vector<int64_t> slots = ChunkSlots(rig.table);
      std::vector<Kv> before, fresh;
      for (int32_t l = 0; l < kLayers; ++l) {
        before.push_back(Read(*rig.runner, l, slots));
        fresh.push_back(Read(*rig.fresh, l, slots));
      }
      // The chunk rows (group) and the 4 tokens after it, logits for the last one.
      const std::vector<BlendGroup> groups = {
          {.first_row = 0, .num_rows = kChunkLen, .num_keep = keep}};
      ModelOutput out;
      std::vector<int32_t> kept_rows;
      ASSERT_TRUE(Forward(*rig.runner, rig.tokens, kChunkBegin, kLen, 0, rig.table, &out, groups,
                          layer, /*logits=*/true, &kept_rows)
                      .ok());
      ASSERT_EQ(out.logits.size(), static_cast<size_t>(kVocab));
      // Layers 0..layer are fresh for every chunk row, so the ranking is against plain compute.
      const std::vector<int32_t> want = BruteForceTop(
          before[static_cast<size_t>(layer)], fresh[static_cast<size_t>(layer)], kChunkLen, keep);
      EXPECT_EQ(kept_rows, want);
      for (int32_t l = 0; l < kLayers; ++l) {
        const Kv after = Read(*rig.runner, l, slots);
        const size_t width = after.k.size() / kChunkLen;
        for (int32_t r = 0; r < kChunkLen; ++r) {
          const bool kept = std::find(want.begin(), want.end(), r) != want.end();
          const auto row = [&](const std::vector<float>& all) {
            return std::vector<float>(all.begin() + static_cast<ptrdiff_t>(r * width),
                                      all.begin() + static_cast<ptrdiff_t>((r + 1) * width));
          };
          const Kv& ref =
              l <= layer ? fresh[static_cast<size_t>(l)] : before[static_cast<size_t>(l)];
          if (l <= layer) {
            ExpectNear(row(after.k), row(ref.k), 1e-5, "fresh k");
            ExpectNear(row(after.v), row(ref.v), 1e-5, "fresh v");
          } else if (!kept) {
            EXPECT_EQ(row(after.k), row(ref.k)) << "layer " << l << " row " << r;
            EXPECT_EQ(row(after.v), row(ref.v)) << "layer " << l << " row " << r;
          } else {
            EXPECT_NE(row(after.k), row(ref.k)) << "layer " << l << " row " << r;
          }
        }
      }
    }
  }
}

// Quantized pages: the hook ranks the rows by their decoded K/V (ReadKv's floats, not the pages'
// stored bytes per token), so it keeps the same rows a float64 ranking of the decoded values does.
TEST(ModelRunnerBlendTest, QuantizedPagesRankTheDecodedRows) {
  for (DType dtype : {DType::kInt8, DType::kFp8E4M3}) {
    SCOPED_TRACE(DTypeName(dtype));
    BlendRig rig = MakeBlendRig(dtype);
    const std::vector<int64_t> slots = ChunkSlots(rig.table);
    const Kv before = Read(*rig.runner, 1, slots);
    const Kv fresh = Read(*rig.fresh, 1, slots);
    const std::vector<BlendGroup> groups = {{.first_row = 0, .num_rows = kChunkLen, .num_keep = 5}};
    ModelOutput out;
    std::vector<int32_t> kept_rows;
    ASSERT_TRUE(Forward(*rig.runner, rig.tokens, kChunkBegin, kLen, 0, rig.table, &out, groups,
                        /*blend_layer=*/1, /*logits=*/true, &kept_rows)
                    .ok());
    EXPECT_EQ(kept_rows, BruteForceTop(before, fresh, kChunkLen, 5));
  }
}

TEST(ModelRunnerBlendTest, KeepingEveryRowEqualsAPlainPass) {
  BlendRig rig = MakeBlendRig();
  const std::vector<BlendGroup> groups = {
      {.first_row = 0, .num_rows = kChunkLen, .num_keep = kChunkLen}};
  ModelOutput blend, plain;
  std::vector<int32_t> kept_rows;
  ASSERT_TRUE(Forward(*rig.runner, rig.tokens, kChunkBegin, kLen, 0, rig.table, &blend, groups, 1,
                      /*logits=*/true, &kept_rows)
                  .ok());
  ASSERT_TRUE(Forward(*rig.fresh, rig.tokens, kChunkBegin, kLen, 0, rig.table, &plain, {}, 0,
                      /*logits=*/true)
                  .ok());
  EXPECT_EQ(kept_rows.size(), static_cast<size_t>(kChunkLen));
  ExpectNear(blend.logits, plain.logits, 1e-5, "logits");
  std::vector<int64_t> all;
  for (int32_t p = 0; p < kLen; ++p) all.push_back(p);  // blocks 0.. in order: slot == position
  for (int32_t l = 0; l < kLayers; ++l) {
    const Kv a = Read(*rig.runner, l, all), b = Read(*rig.fresh, l, all);
    ExpectNear(a.k, b.k, 1e-5, "k");
    ExpectNear(a.v, b.v, 1e-5, "v");
  }
}

TEST(ModelRunnerBlendTest, EveryRowDroppedRunsNoLaterLayer) {
  BlendRig rig = MakeBlendRig();
  const std::vector<int64_t> slots = ChunkSlots(rig.table);
  const Kv top_before = Read(*rig.runner, kLayers - 1, slots);
  const std::vector<BlendGroup> groups = {{.first_row = 0, .num_rows = kChunkLen, .num_keep = 0}};
  ModelOutput out;
  std::vector<int32_t> kept_rows = {-1};
  ASSERT_TRUE(Forward(*rig.runner, rig.tokens, kChunkBegin, kChunkEnd, 0, rig.table, &out, groups,
                      0, /*logits=*/false, &kept_rows)
                  .ok());
  EXPECT_TRUE(kept_rows.empty());
  EXPECT_EQ(Read(*rig.runner, kLayers - 1, slots).k, top_before.k);
}

TEST(ModelRunnerBlendTest, BadGroupsAreInvalidArgumentAndWriteNothing) {
  BlendRig rig = MakeBlendRig();
  const std::vector<int64_t> slots = ChunkSlots(rig.table);
  const Kv before = Read(*rig.runner, 0, slots);
  const int32_t n = kLen - kChunkBegin;
  for (const auto& [groups, layer] : std::vector<std::pair<std::vector<BlendGroup>, int32_t>>{
           {{{.first_row = 0, .num_rows = 4, .num_keep = 5}}, 1},        // keep > rows
           {{{.first_row = 0, .num_rows = 4, .num_keep = -1}}, 1},       // negative keep
           {{{.first_row = 0, .num_rows = 0, .num_keep = 0}}, 1},        // empty
           {{{.first_row = n - 2, .num_rows = 4, .num_keep = 1}}, 1},    // past the batch
           {{{.first_row = n - 1, .num_rows = 1, .num_keep = 1}}, 1},    // the logits row
           {{{.first_row = 0, .num_rows = 4, .num_keep = 1}}, kLayers},  // layer out of range
           {{{.first_row = 0, .num_rows = 4, .num_keep = 1}}, -1},
           {{{.first_row = 2, .num_rows = 4, .num_keep = 1},
             {.first_row = 4, .num_rows = 2, .num_keep = 1}},
            1}}) {  // overlap
    ModelOutput out;
    EXPECT_EQ(Forward(*rig.runner, rig.tokens, kChunkBegin, kLen, 0, rig.table, &out, groups, layer,
                      /*logits=*/true)
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(Read(*rig.runner, 0, slots).k, before.k);
}

TEST(ModelRunnerBlendTest, MostDeviatingTokensBreaksTiesTowardsTheLowerIndex) {
  const std::vector<float> zero(8, 0.0f), k = {1, 0, 2, 0, 1, 0, 0, 0};
  EXPECT_EQ(MostDeviatingTokens(k, zero, zero, zero, 2, 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(MostDeviatingTokens(k, zero, zero, zero, 2, 1), (std::vector<int32_t>{1}));
  EXPECT_EQ(MostDeviatingTokens(k, zero, zero, zero, 2, 0), (std::vector<int32_t>{}));
  EXPECT_EQ(NumToRecompute(0.3, 13), 4);
  EXPECT_EQ(NumToRecompute(1.0, 13), 13);
  EXPECT_EQ(NumToRecompute(0.0, 13), 0);
}

// ---- Engine ------------------------------------------------------------------------------------

constexpr int32_t kDocLength = 13;

class EngineBlendTest : public ::testing::Test {
 protected:
  EngineBlendTest() {
    TinyShape shape;
    shape.seq_len = 96;
    shape.n_layers = kLayers;
    shape.shared_classifier = false;
    weights_ = TinyWeights(shape, 31, "engine_blend_model.bin");
    std::mt19937 rng(2026);
    doc_ = RandomTokens(rng, kDocLength);
    for (int i = 0; i < 8; ++i) fillers_.push_back(RandomTokens(rng, 20));
  }
  static EngineOptions Options(ChunkReuseMode mode, double fraction = 0.0) {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.block_size = kBlockSize;
    o.num_kv_blocks = 128;
    o.return_logits = true;
    o.chunk_reuse.mode = mode;
    o.chunk_reuse.recompute_fraction = fraction;
    o.chunk_reuse.deviation_layer = 1;
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& options) {
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(weights_, options);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(e).value();
  }
  // BOS, `before` tokens of filler `which`, the document (marked), `after` tokens of the next.
  GenerationRequest WithDoc(int which, int before, int after, int max_new_tokens) const {
    GenerationRequest r;
    r.prompt_tokens = {1};
    const std::vector<TokenId>& f = fillers_[static_cast<size_t>(which)];
    r.prompt_tokens.insert(r.prompt_tokens.end(), f.begin(), f.begin() + before);
    r.chunks = {{.offset = static_cast<int32_t>(r.prompt_tokens.size()), .length = kDocLength}};
    r.prompt_tokens.insert(r.prompt_tokens.end(), doc_.begin(), doc_.end());
    const std::vector<TokenId>& g = fillers_[static_cast<size_t>(which + 1)];
    r.prompt_tokens.insert(r.prompt_tokens.end(), g.begin(), g.begin() + after);
    r.max_new_tokens = max_new_tokens;
    r.stop_at_eos = false;
    return r;
  }
  // Steps until nothing is left (checking invariants); results in finishing order, and the
  // logits rows of request `watch`.
  static std::vector<GenerationResult> Drain(Engine& engine, RequestId watch = 0,
                                             std::vector<std::vector<float>>* rows = nullptr) {
    std::vector<GenerationResult> done;
    while (engine.HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = engine.Step();
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) break;
      EXPECT_TRUE(engine.kv_cache_manager().ValidateInvariants().ok());
      if (EngineInternal::ChunkReuse(engine) != nullptr) {
        EXPECT_TRUE(EngineInternal::ChunkReuse(engine)->index().ValidateInvariants().ok());
      }
      for (size_t i = 0; i < step->tokens.size(); ++i) {
        if (rows != nullptr && step->tokens[i].request_id == watch) {
          rows->emplace_back(step->logits.begin() + static_cast<ptrdiff_t>(i) * kVocab,
                             step->logits.begin() + static_cast<ptrdiff_t>(i + 1) * kVocab);
        }
      }
      for (GenerationResult& r : step->finished) done.push_back(std::move(r));
    }
    return done;
  }
  static GenerationResult RunPair(Engine& engine, const GenerationRequest& first,
                                  const GenerationRequest& second,
                                  std::vector<std::vector<float>>* rows = nullptr) {
    EXPECT_TRUE(engine.AddRequest(first).ok());
    Drain(engine);
    absl::StatusOr<RequestId> id = engine.AddRequest(second);
    EXPECT_TRUE(id.ok()) << id.status();
    std::vector<GenerationResult> done = Drain(engine, *id, rows);
    EXPECT_EQ(done.size(), 1u);
    return done.empty() ? GenerationResult{} : done[0];
  }
  static void ExpectAllBlocksAvailable(Engine& engine) {
    EXPECT_EQ(engine.kv_cache_manager().NumRequests(), 0);
    EXPECT_EQ(engine.kv_cache_manager().NumAvailableBlocks(),
              engine.kv_cache_manager().num_blocks());
  }
  static void ExpectRowsNear(const std::vector<std::vector<float>>& a,
                             const std::vector<std::vector<float>>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t g = 0; g < a.size(); ++g) ExpectNear(a[g], b[g], 1e-4, "logits");
  }

  std::shared_ptr<const ModelWeights> weights_;
  std::vector<TokenId> doc_;
  std::vector<std::vector<TokenId>> fillers_;
};

TEST_F(EngineBlendTest, FractionOneEqualsFullRecompute) {
  const GenerationRequest a = WithDoc(0, 5, 3, 4), b = WithDoc(2, 10, 4, 8);
  auto off = MakeEngine(Options(ChunkReuseMode::kOff));
  std::vector<std::vector<float>> off_rows, blend_rows;
  const GenerationResult want = RunPair(*off, a, b, &off_rows);
  auto blend = MakeEngine(Options(ChunkReuseMode::kReRotate, 1.0));
  const GenerationResult got = RunPair(*blend, a, b, &blend_rows);
  EXPECT_EQ(got.num_shifted_hit_tokens, kDocLength);
  EXPECT_EQ(got.output_tokens, want.output_tokens);
  ExpectRowsNear(blend_rows, off_rows);
  EXPECT_EQ(blend->stats().num_blend_recomputed_tokens, kDocLength);
  EXPECT_EQ(blend->stats().num_blend_partial_tokens, 0);
  // The document's tokens are in the batch again (so no compute is saved at fraction 1).
  EXPECT_EQ(blend->stats().num_computed_tokens, off->stats().num_computed_tokens);
  ExpectAllBlocksAvailable(*blend);
}

TEST_F(EngineBlendTest, FractionZeroEqualsPlainReRotation) {
  const GenerationRequest a = WithDoc(0, 5, 3, 4), b = WithDoc(2, 10, 4, 8);
  auto rerotate = MakeEngine(Options(ChunkReuseMode::kReRotate));
  EngineOptions zero = Options(ChunkReuseMode::kReRotate, 0.0);
  zero.chunk_reuse.deviation_layer = 2;
  auto blend = MakeEngine(zero);
  std::vector<std::vector<float>> rows[2];
  const GenerationResult want = RunPair(*rerotate, a, b, &rows[0]);
  const GenerationResult got = RunPair(*blend, a, b, &rows[1]);
  EXPECT_EQ(got.num_shifted_hit_tokens, kDocLength);
  EXPECT_EQ(got.output_tokens, want.output_tokens);
  EXPECT_EQ(rows[1], rows[0]);
  EXPECT_EQ(blend->stats().num_computed_tokens, rerotate->stats().num_computed_tokens);
  EXPECT_EQ(blend->stats().num_blend_recomputed_tokens + blend->stats().num_blend_partial_tokens,
            0);
}

TEST_F(EngineBlendTest, IntermediateFractionRecomputesTheExpectedTokens) {
  const GenerationRequest a = WithDoc(0, 5, 3, 2), b = WithDoc(2, 9, 4, 6);
  const int32_t p1 = b.chunks[0].offset;
  const int32_t want_kept = NumToRecompute(0.3, kDocLength);  // 4
  // After B's reuse step: the document's KV in layer 2 (above deviation_layer 1), plain
  // re-rotation against blending.
  std::vector<float> top[2];
  for (int blend = 0; blend < 2; ++blend) {
    auto engine = MakeEngine(Options(ChunkReuseMode::kReRotate, blend ? 0.3 : 0.0));
    ASSERT_TRUE(engine->AddRequest(a).ok());
    Drain(*engine);
    absl::StatusOr<RequestId> id = engine->AddRequest(b);
    ASSERT_TRUE(id.ok());
    absl::StatusOr<StepOutput> step = engine->Step();  // the tokens before the document
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_EQ(step->batch.num_shifted_hit_tokens, 0);
    step = engine->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_EQ(step->batch.num_shifted_hit_tokens, kDocLength);
    EXPECT_EQ(step->batch.num_blend_tokens, blend ? kDocLength : 0);
    absl::StatusOr<std::span<const BlockId>> table = engine->kv_cache_manager().GetBlockTable(*id);
    ASSERT_TRUE(table.ok());
    std::vector<int64_t> slots;
    for (int32_t p = p1; p < p1 + kDocLength; ++p) {
      slots.push_back(int64_t{(*table)[static_cast<size_t>(p / kBlockSize)]} * kBlockSize +
                      p % kBlockSize);
    }
    std::vector<float> v;
    ASSERT_TRUE(EngineInternal::Runner(*engine).ReadKv(2, slots, &top[blend], &v).ok());
    Drain(*engine);
    if (blend) {
      EXPECT_EQ(engine->stats().num_blend_recomputed_tokens, want_kept);
      EXPECT_EQ(engine->stats().num_blend_partial_tokens, kDocLength - want_kept);
    }
    ExpectAllBlocksAvailable(*engine);
  }
  // Exactly the recomputed tokens differ from plain re-rotation above the deviation layer.
  const size_t width = top[0].size() / kDocLength;
  int32_t differing = 0;
  for (size_t t = 0; t < kDocLength; ++t) {
    const bool same = std::equal(top[0].begin() + static_cast<ptrdiff_t>(t * width),
                                 top[0].begin() + static_cast<ptrdiff_t>((t + 1) * width),
                                 top[1].begin() + static_cast<ptrdiff_t>(t * width));
    differing += same ? 0 : 1;
  }
  EXPECT_EQ(differing, want_kept);
}

TEST_F(EngineBlendTest, SmallBudgetSplitsTheChunkAndStillEqualsFullRecompute) {
  const GenerationRequest a = WithDoc(0, 5, 3, 3), b = WithDoc(2, 10, 6, 6);
  for (double fraction : {1.0, 0.5}) {
    SCOPED_TRACE(fraction);
    EngineOptions options = Options(ChunkReuseMode::kReRotate, fraction);
    options.scheduler.max_num_batched_tokens = 5;
    auto engine = MakeEngine(options);
    ASSERT_TRUE(engine->AddRequest(a).ok());
    Drain(*engine);
    ASSERT_TRUE(engine->AddRequest(b).ok());
    int64_t want_kept = 0, blend_tokens = 0;
    std::vector<TokenId> out;
    while (engine->HasUnfinishedRequests()) {
      absl::StatusOr<StepOutput> step = engine->Step();
      ASSERT_TRUE(step.ok()) << step.status();
      EXPECT_LE(step->batch.num_scheduled_tokens, 5);
      want_kept += NumToRecompute(fraction, step->batch.num_blend_tokens);
      blend_tokens += step->batch.num_blend_tokens;
      for (const TokenOutput& t : step->tokens) out.push_back(t.token);
    }
    EXPECT_EQ(blend_tokens, kDocLength);
    EXPECT_EQ(engine->stats().num_shifted_hit_tokens, kDocLength);
    EXPECT_EQ(engine->stats().num_blend_recomputed_tokens, want_kept);
    EXPECT_EQ(engine->stats().num_blend_partial_tokens, kDocLength - want_kept);
    if (fraction == 1.0) {
      auto off = MakeEngine(Options(ChunkReuseMode::kOff));
      absl::StatusOr<std::vector<GenerationResult>> r = off->Generate({a, b});
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(out, (*r)[1].output_tokens);
    }
    ExpectAllBlocksAvailable(*engine);
  }
}

TEST_F(EngineBlendTest, MixedBatchWithADecodingRequest) {
  // C decodes while B's document is blended in the same step.
  const GenerationRequest a = WithDoc(0, 5, 3, 2), b = WithDoc(2, 10, 4, 6);
  GenerationRequest c;
  c.prompt_tokens = fillers_[6];
  c.max_new_tokens = 20;
  c.stop_at_eos = false;
  auto off = MakeEngine(Options(ChunkReuseMode::kOff));
  absl::StatusOr<std::vector<GenerationResult>> want_b = off->Generate({a, b});
  absl::StatusOr<std::vector<GenerationResult>> want_c = off->Generate({c});
  ASSERT_TRUE(want_b.ok() && want_c.ok());

  auto engine = MakeEngine(Options(ChunkReuseMode::kReRotate, 1.0));
  ASSERT_TRUE(engine->AddRequest(a).ok());
  Drain(*engine);
  ASSERT_TRUE(engine->AddRequest(c).ok());
  ASSERT_TRUE(engine->Step().ok());  // C's prefill
  ASSERT_TRUE(engine->AddRequest(b).ok());
  std::vector<GenerationResult> done;
  bool blended = false;
  while (!blended && engine->HasUnfinishedRequests()) {
    absl::StatusOr<StepOutput> step = engine->Step();
    ASSERT_TRUE(step.ok());
    for (const GenerationResult& r : step->finished) done.push_back(r);
    if (step->batch.num_blend_tokens == 0) continue;
    blended = true;
    EXPECT_EQ(step->batch.num_scheduled_seqs, 2);
    EXPECT_EQ(step->batch.num_decode_tokens, 1);
    EXPECT_EQ(step->batch.num_blend_tokens, kDocLength);
  }
  EXPECT_TRUE(blended);
  for (GenerationResult& r : Drain(*engine)) done.push_back(std::move(r));
  ASSERT_EQ(done.size(), 2u);
  for (const GenerationResult& r : done) {
    const std::vector<TokenId>& want = r.prompt_tokens == c.prompt_tokens
                                           ? (*want_c)[0].output_tokens
                                           : (*want_b)[1].output_tokens;
    EXPECT_EQ(r.output_tokens, want) << "request " << r.request_id;
  }
  ExpectAllBlocksAvailable(*engine);
}

TEST_F(EngineBlendTest, PreemptionAndPrefixCachingWithFractionOneEqualFullRecompute) {
  // Many requests sharing the document at random positions, a pool small enough to preempt.
  std::mt19937 rng(9);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 10; ++i) {
    GenerationRequest r = WithDoc(static_cast<int>(rng() % 6), static_cast<int>(rng() % 12),
                                  static_cast<int>(rng() % 5), 6 + static_cast<int>(rng() % 10));
    requests.push_back(r);
  }
  requests.push_back(requests[3]);  // a prefix-cache hit through the document
  auto run = [&](const EngineOptions& options, EngineStats* stats) {
    auto engine = MakeEngine(options);
    absl::StatusOr<std::vector<GenerationResult>> r = engine->Generate(requests);
    EXPECT_TRUE(r.ok()) << r.status();
    *stats = engine->stats();
    ExpectAllBlocksAvailable(*engine);
    std::vector<std::vector<TokenId>> outputs;
    if (r.ok()) {
      for (const GenerationResult& g : *r) outputs.push_back(g.output_tokens);
    }
    return outputs;
  };
  EngineOptions small = Options(ChunkReuseMode::kReRotate, 1.0);
  small.num_kv_blocks = 28;
  small.scheduler.max_num_batched_tokens = 24;
  EngineStats off_stats, blend_stats;
  EngineOptions off = small;
  off.chunk_reuse = {};
  const auto want = run(off, &off_stats);
  const auto got = run(small, &blend_stats);
  EXPECT_EQ(got, want);
  EXPECT_GT(blend_stats.num_preemptions, 0);
  EXPECT_GT(blend_stats.num_shifted_hit_tokens, 0);
  EXPECT_GT(blend_stats.num_prefix_hit_tokens, 0);
  EXPECT_GT(blend_stats.num_blend_recomputed_tokens, 0);
  EXPECT_EQ(blend_stats.num_blend_partial_tokens, 0);
}

TEST_F(EngineBlendTest, BadOptionsAreInvalidArgument) {
  for (double fraction : {-0.1, 1.5, std::nan("")}) {
    EXPECT_EQ(
        Engine::Create(weights_, Options(ChunkReuseMode::kReRotate, fraction)).status().code(),
        absl::StatusCode::kInvalidArgument)
        << fraction;
  }
  for (int32_t layer : {-1, kLayers, kLayers + 5}) {
    EngineOptions o = Options(ChunkReuseMode::kReRotate, 0.5);
    o.chunk_reuse.deviation_layer = layer;
    EXPECT_EQ(Engine::Create(weights_, o).status().code(), absl::StatusCode::kInvalidArgument)
        << layer;
  }
  EXPECT_EQ(Engine::Create(weights_, Options(ChunkReuseMode::kOff, 0.5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The last layer is a valid deviation layer; an out-of-range one is fine while blending is off.
  EngineOptions last = Options(ChunkReuseMode::kReRotate, 0.5);
  last.chunk_reuse.deviation_layer = kLayers - 1;
  EXPECT_TRUE(Engine::Create(weights_, last).ok());
  EngineOptions unused = Options(ChunkReuseMode::kReRotate, 0.0);
  unused.chunk_reuse.deviation_layer = kLayers + 1;
  EXPECT_TRUE(Engine::Create(weights_, unused).ok());
}

TEST(EngineBlendAidreamsTest, FractionOneEqualsFullRecomputeOnARealModel) {
  auto dir = pagedkv::testing::SharedDataDir();
  if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const auto model = *dir / "aidreams260K" / "aidreams260K.bin";
  const auto tok = *dir / "aidreams260K" / "tok512.bin";
  if (!std::filesystem::exists(model) || !std::filesystem::exists(tok)) {
    GTEST_SKIP() << "aidreams260K not present";
  }
  auto load = [&](ChunkReuseMode mode, double fraction) {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.chunk_reuse.mode = mode;
    o.chunk_reuse.recompute_fraction = fraction;
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Load(model.string(), tok.string(), o);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(e).value();
  };
  auto off = load(ChunkReuseMode::kOff, 0.0);
  const std::vector<TokenId> doc =
      off->tokenizer()->Encode("Echoes of vectors unfold in quiet rooms of light").value();
  const std::vector<TokenId> tail = off->tokenizer()->Encode(" and then").value();
  auto request = [&](const std::string& head) {
    GenerationRequest r;
    r.prompt_tokens = off->tokenizer()->Encode(head).value();
    r.chunks = {{.offset = static_cast<int32_t>(r.prompt_tokens.size()),
                 .length = static_cast<int32_t>(doc.size()) - 1}};
    // Without the second BOS of each encoding.
    r.prompt_tokens.insert(r.prompt_tokens.end(), doc.begin() + 1, doc.end());
    r.prompt_tokens.insert(r.prompt_tokens.end(), tail.begin() + 1, tail.end());
    r.max_new_tokens = 24;
    r.stop_at_eos = false;
    return r;
  };
  const GenerationRequest a = request("A dream:"), b = request("In the night the machine said:");
  absl::StatusOr<std::vector<GenerationResult>> want = off->Generate({a, b});
  ASSERT_TRUE(want.ok());
  for (const auto& [mode, fraction] : std::vector<std::pair<ChunkReuseMode, double>>{
           {ChunkReuseMode::kReRotate, 1.0}, {ChunkReuseMode::kReRotate, 0.3}}) {
    auto engine = load(mode, fraction);
    absl::StatusOr<std::vector<GenerationResult>> got = engine->Generate({a});
    ASSERT_TRUE(got.ok());
    got = engine->Generate({b});
    ASSERT_TRUE(got.ok());
    EXPECT_EQ((*got)[0].num_shifted_hit_tokens, static_cast<int32_t>(doc.size()) - 1);
    const int64_t chunk = static_cast<int64_t>(doc.size()) - 1;
    EXPECT_EQ(engine->stats().num_blend_recomputed_tokens,
              NumToRecompute(fraction, static_cast<int32_t>(chunk)));
    if (fraction == 1.0) {
      EXPECT_EQ((*got)[0].output_tokens, (*want)[1].output_tokens);
    }
  }
}

}  // namespace
}  // namespace pagedkv
