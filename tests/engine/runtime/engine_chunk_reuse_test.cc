// Copyright 2026 The pagedkv Authors.
//
// Shifted-position reuse inside the Engine (EngineOptions.chunk_reuse, GenerationRequest.chunks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::TinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kDocLength = 13;
constexpr int32_t kVocab = 64;

class EngineChunkReuseTest : public ::testing::Test {
 protected:
  EngineChunkReuseTest() : model_(MakeTinyLlama2c(Shape(), 31)) {
    const auto path = WriteTempFile("engine_chunk_reuse_model.bin", model_.FileBytes());
    absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
    EXPECT_TRUE(w.ok()) << w.status();
    weights_ = std::make_shared<const ModelWeights>(std::move(w).value());
    std::mt19937 rng(2026);
    auto random = [&](int n) {
      std::vector<TokenId> t(static_cast<size_t>(n));
      for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % (kVocab - 3));
      return t;
    };
    doc_ = random(kDocLength);
    for (int i = 0; i < 8; ++i) fillers_.push_back(random(20));
  }
  static TinyShape Shape() {
    TinyShape s;
    s.seq_len = 96;
    s.shared_classifier = false;
    return s;
  }
  static EngineOptions Options(ChunkReuseMode mode) {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.block_size = kBlockSize;
    o.num_kv_blocks = 128;
    o.return_logits = true;
    o.chunk_reuse.mode = mode;
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& options) {
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(weights_, options);
    EXPECT_TRUE(e.ok()) << e.status();
    return std::move(e).value();
  }
  // BOS, `before` filler tokens (filler `which`), the document, `after` filler tokens; the
  // document marked as a chunk.
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
  // Steps until nothing is left, checking the cache's invariants after every step; returns the
  // results by request id order of finishing, and every logits row of request `watch`.
  std::vector<GenerationResult> Drain(Engine& engine, RequestId watch = 0,
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
  // Runs `first` to completion, then `second`; returns the second's result (and logits rows).
  GenerationResult RunPair(Engine& engine, const GenerationRequest& first,
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
  // Layer-0 K of request `id` at positions [begin, begin + n) (REQUIRES: it holds blocks).
  static std::vector<float> Layer0Keys(Engine& engine, RequestId id, int32_t begin, int32_t n) {
    absl::StatusOr<std::span<const BlockId>> table = engine.kv_cache_manager().GetBlockTable(id);
    EXPECT_TRUE(table.ok()) << table.status();
    std::vector<int64_t> slots;
    for (int32_t p = begin; p < begin + n; ++p) {
      slots.push_back(int64_t{(*table)[static_cast<size_t>(p / kBlockSize)]} * kBlockSize +
                      p % kBlockSize);
    }
    std::vector<float> k, v;
    EXPECT_TRUE(EngineInternal::Runner(engine).ReadKv(0, slots, &k, &v).ok());
    return k;
  }
  // Layer-0 K of `b`'s document computed fresh: `b` alone on an engine with `options`, read
  // after its prefill step.
  std::vector<float> FreshLayer0Keys(const EngineOptions& options, const GenerationRequest& b) {
    auto engine = MakeEngine(options);
    absl::StatusOr<RequestId> id = engine->AddRequest(b);
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(engine->Step().ok());
    return id.ok() ? Layer0Keys(*engine, *id, b.chunks[0].offset, kDocLength)
                   : std::vector<float>();
  }
  // Layer-0 K of `b`'s document moved on `engine`: `a` runs to completion, then `b` steps until
  // it has reused the document (its KV then still held).
  std::vector<float> MovedLayer0Keys(Engine& engine, const GenerationRequest& a,
                                     const GenerationRequest& b) {
    EXPECT_TRUE(engine.AddRequest(a).ok());
    Drain(engine);
    absl::StatusOr<RequestId> id = engine.AddRequest(b);
    EXPECT_TRUE(id.ok()) << id.status();
    while (engine.stats().num_shifted_hit_tokens == 0 && engine.HasUnfinishedRequests()) {
      if (!engine.Step().ok()) break;
    }
    EXPECT_EQ(engine.stats().num_shifted_hit_tokens, kDocLength);
    return id.ok() ? Layer0Keys(engine, *id, b.chunks[0].offset, kDocLength) : std::vector<float>();
  }
  static void ExpectAllBlocksAvailable(Engine& engine) {
    EXPECT_EQ(engine.kv_cache_manager().NumRequests(), 0);
    EXPECT_EQ(engine.kv_cache_manager().NumAvailableBlocks(),
              engine.kv_cache_manager().num_blocks());
  }

  TinyLlama2c model_;
  std::shared_ptr<const ModelWeights> weights_;
  std::vector<TokenId> doc_;
  std::vector<std::vector<TokenId>> fillers_;
};

TEST_F(EngineChunkReuseTest, DocumentCachedAtAnotherPositionIsReusedAndCountsAsComputed) {
  const GenerationRequest a = WithDoc(0, 5, 3, 4);   // document at position 6
  const GenerationRequest b = WithDoc(2, 10, 4, 6);  // document at position 11
  int64_t computed[2] = {0, 0};
  std::vector<TokenId> outputs[2];
  for (int reuse = 0; reuse < 2; ++reuse) {
    auto engine =
        MakeEngine(Options(reuse == 1 ? ChunkReuseMode::kReRotate : ChunkReuseMode::kOff));
    const GenerationResult r = RunPair(*engine, a, b);
    computed[reuse] = engine->stats().num_computed_tokens;
    outputs[reuse] = r.output_tokens;
    EXPECT_EQ(r.output_tokens.size(), 6u);
    EXPECT_EQ(r.num_shifted_hit_tokens, reuse == 1 ? kDocLength : 0);
    EXPECT_EQ(engine->stats().num_shifted_hit_tokens, reuse == 1 ? kDocLength : 0);
    EXPECT_EQ(engine->scheduler().stats().num_shifted_hit_tokens, reuse == 1 ? kDocLength : 0);
    ExpectAllBlocksAvailable(*engine);
  }
  // The document's tokens were moved, not computed.
  EXPECT_EQ(computed[0] - computed[1], kDocLength);
}

TEST_F(EngineChunkReuseTest, ReusedLayer0KeysEqualFreshAtAlignedAndUnalignedShifts) {
  const GenerationRequest a = WithDoc(0, 5, 3, 2);  // document at position 6
  // Shifts +5 (unaligned), +4 (aligned), -4, 0 and +1.
  for (int before : {10, 9, 1, 5, 6}) {
    SCOPED_TRACE(before);
    const GenerationRequest b = WithDoc(2, before, 4, 8);
    const std::vector<float> fresh = FreshLayer0Keys(Options(ChunkReuseMode::kOff), b);
    auto engine = MakeEngine(Options(ChunkReuseMode::kReRotate));
    const std::vector<float> got = MovedLayer0Keys(*engine, a, b);
    ASSERT_EQ(got.size(), fresh.size());
    // f32 storage, interleaved pairs: |diff| <= (3u + 1e-6) |pair| (two roundings + trig).
    const double u = std::ldexp(1.0, -24);
    for (size_t d = 0; d < fresh.size(); ++d) {
      const double norm = std::hypot(double{fresh[d]}, double{fresh[d ^ 1]});
      EXPECT_LE(std::abs(double{got[d]} - fresh[d]), (3.0 * u + 1e-6) * norm + 1e-30)
          << "element " << d;
    }
    Drain(*engine);
    ExpectAllBlocksAvailable(*engine);
  }
}

// An int8 KV cache: a chunk moved from its kept float keys (ChunkReuseOptions::float_keys_memory)
// holds the layer-0 keys a fresh computation at the new position stores (one rounding, up to the
// rare fp32 rounding of the rotation); moved from its rounded keys, many differ by a step. A
// budget too small for the chunk's keys keeps none.
TEST_F(EngineChunkReuseTest, QuantizedKeysMovedFromFloatKeysMatchFreshKeys) {
  const GenerationRequest a = WithDoc(0, 5, 3, 2);   // document at position 6
  const GenerationRequest b = WithDoc(2, 10, 4, 4);  // at position 11: shift +5
  EngineOptions options = Options(ChunkReuseMode::kOff);
  options.kv_dtype = DType::kInt8;
  const std::vector<float> fresh = FreshLayer0Keys(options, b);
  // Budgets: off, too small for the chunk's keys, enough.
  const int64_t budgets[] = {0, 64, 1 << 20};
  double equal[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(budgets[i]);
    options.chunk_reuse.mode = ChunkReuseMode::kReRotate;
    options.chunk_reuse.float_keys_memory = budgets[i];
    auto engine = MakeEngine(options);
    const std::vector<float> got = MovedLayer0Keys(*engine, a, b);
    ASSERT_EQ(got.size(), fresh.size());
    const ShiftedChunkReuse& reuse = *EngineInternal::ChunkReuse(*engine);
    EXPECT_EQ(reuse.stats().float_key_moves, i == 2 ? kDocLength : 0);
    EXPECT_EQ(engine->stats().num_float_key_moves, reuse.stats().float_key_moves);
    if (i > 0) {
      EXPECT_EQ(reuse.float_keys()->stats().too_large, i == 1 ? 1 : 0);
    }
    for (size_t d = 0; d < fresh.size(); ++d) equal[i] += got[d] == fresh[d];
    equal[i] /= static_cast<double>(fresh.size());
    Drain(*engine);
    ExpectAllBlocksAvailable(*engine);
  }
  EXPECT_GE(equal[2], 0.97);
  EXPECT_LT(equal[0], equal[2] - 0.1) << "a rounded key moved is rounded again";
  EXPECT_EQ(equal[1], equal[0]);
}

TEST_F(EngineChunkReuseTest, NoShiftGivesOutputsIdenticalToPrefixReuse) {
  const GenerationRequest a = WithDoc(0, 5, 3, 3);
  GenerationRequest b = WithDoc(0, 5, 0, 10);  // same tokens through the document, then its own
  b.prompt_tokens.insert(b.prompt_tokens.end(), fillers_[5].begin(), fillers_[5].begin() + 6);
  // Prefix reuse: reuse off, prefix caching on.
  auto prefix_engine = MakeEngine(Options(ChunkReuseMode::kOff));
  std::vector<std::vector<float>> prefix_rows;
  const GenerationResult by_prefix = RunPair(*prefix_engine, a, b, &prefix_rows);
  EXPECT_GT(by_prefix.num_prefix_hit_tokens, 0);
  // Chunk reuse at p1 == p0 with the prefix cache off.
  EngineOptions options = Options(ChunkReuseMode::kReRotate);
  options.enable_prefix_caching = false;
  auto chunk_engine = MakeEngine(options);
  std::vector<std::vector<float>> chunk_rows;
  const GenerationResult by_chunk = RunPair(*chunk_engine, a, b, &chunk_rows);
  EXPECT_EQ(by_chunk.num_prefix_hit_tokens, 0);
  EXPECT_EQ(by_chunk.num_shifted_hit_tokens, kDocLength);
  EXPECT_EQ(by_chunk.output_tokens, by_prefix.output_tokens);
  ASSERT_EQ(chunk_rows.size(), prefix_rows.size());
  for (size_t g = 0; g < chunk_rows.size(); ++g) {
    for (size_t i = 0; i < chunk_rows[g].size(); ++i) {
      EXPECT_NEAR(chunk_rows[g][i], prefix_rows[g][i], 1e-5) << "token " << g << " logit " << i;
    }
  }
}

TEST_F(EngineChunkReuseTest, ReuseOffGivesOutputsIdenticalToUnmarkedRequests) {
  std::vector<GenerationRequest> marked = {WithDoc(0, 5, 3, 5), WithDoc(2, 10, 4, 5),
                                           WithDoc(4, 1, 2, 5)};
  std::vector<GenerationRequest> plain = marked;
  for (GenerationRequest& r : plain) r.chunks.clear();
  auto off_marked = MakeEngine(Options(ChunkReuseMode::kOff));
  auto off_plain = MakeEngine(Options(ChunkReuseMode::kOff));
  auto on_plain = MakeEngine(Options(ChunkReuseMode::kReRotate));
  for (size_t i = 0; i < marked.size(); ++i) {
    std::vector<std::vector<float>> rows[3];
    const GenerationResult r0 = RunPair(*off_marked, marked[i], marked[i], &rows[0]);
    const GenerationResult r1 = RunPair(*off_plain, plain[i], plain[i], &rows[1]);
    const GenerationResult r2 = RunPair(*on_plain, plain[i], plain[i], &rows[2]);
    EXPECT_EQ(r0.output_tokens, r1.output_tokens);
    EXPECT_EQ(r2.output_tokens, r1.output_tokens);
    EXPECT_EQ(rows[0], rows[1]);
    EXPECT_EQ(rows[2], rows[1]);
    EXPECT_EQ(r0.num_shifted_hit_tokens + r2.num_shifted_hit_tokens, 0);
  }
  EXPECT_EQ(off_marked->stats().num_computed_tokens, off_plain->stats().num_computed_tokens);
  EXPECT_EQ(on_plain->stats().num_computed_tokens, off_plain->stats().num_computed_tokens);
}

TEST_F(EngineChunkReuseTest, EvictedChunkFallsBackToRecompute) {
  EngineOptions options = Options(ChunkReuseMode::kReRotate);
  options.num_kv_blocks = 24;  // 96 token slots: the fillers below evict the chunk's blocks
  auto engine = MakeEngine(options);
  ASSERT_TRUE(engine->AddRequest(WithDoc(0, 5, 3, 2)).ok());
  Drain(*engine);
  ASSERT_EQ(EngineInternal::ChunkReuse(*engine)->index().size(), 1);
  for (int f = 1; f < 6; ++f) {
    GenerationRequest filler;
    filler.prompt_tokens = fillers_[static_cast<size_t>(f)];
    filler.max_new_tokens = 12;
    filler.stop_at_eos = false;
    ASSERT_TRUE(engine->AddRequest(filler).ok());
  }
  Drain(*engine);
  EXPECT_EQ(EngineInternal::ChunkReuse(*engine)->index().size(), 0);
  EXPECT_GT(EngineInternal::ChunkReuse(*engine)->index().stats().invalidations, 0);

  const GenerationRequest b = WithDoc(2, 10, 4, 6);
  absl::StatusOr<RequestId> id = engine->AddRequest(b);
  ASSERT_TRUE(id.ok());
  std::vector<GenerationResult> done = Drain(*engine);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].num_shifted_hit_tokens, 0);
  auto off = MakeEngine(Options(ChunkReuseMode::kOff));
  absl::StatusOr<std::vector<GenerationResult>> want = off->Generate({b});
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(done[0].output_tokens, (*want)[0].output_tokens);
  ExpectAllBlocksAvailable(*engine);
  // B's document was computed, so it is registered again.
  EXPECT_EQ(EngineInternal::ChunkReuse(*engine)->index().size(), 1);
}

TEST_F(EngineChunkReuseTest, BlocksWithReRotatedKvAreNeverOfferedToThePrefixCache) {
  auto engine = MakeEngine(Options(ChunkReuseMode::kReRotate));
  const GenerationRequest b = WithDoc(2, 10, 4, 3);  // document at position 11
  const GenerationResult rb = RunPair(*engine, WithDoc(0, 5, 3, 2), b);
  ASSERT_EQ(rb.num_shifted_hit_tokens, kDocLength);
  // The same prompt again, unmarked: only the blocks before the reused document's first block
  // are exact, so only they are prefix hits (11 / 4 = 2 blocks).
  GenerationRequest again = b;
  again.chunks.clear();
  absl::StatusOr<std::vector<GenerationResult>> r = engine->Generate({again});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].num_prefix_hit_tokens, 2 * kBlockSize);
  // Without reuse the whole prompt but its last token's block is a hit.
  auto off = MakeEngine(Options(ChunkReuseMode::kOff));
  absl::StatusOr<std::vector<GenerationResult>> r_off = off->Generate({b, again});
  ASSERT_TRUE(r_off.ok());
  EXPECT_EQ((*r_off)[1].num_prefix_hit_tokens,
            (static_cast<int32_t>(b.prompt_tokens.size()) - 1) / kBlockSize * kBlockSize);
  ExpectAllBlocksAvailable(*engine);
}

TEST_F(EngineChunkReuseTest, FirstKRecomputesTheLeadingTokensOfEachChunk) {
  EngineOptions options = Options(ChunkReuseMode::kReRotate);
  options.chunk_reuse.first_k = 3;
  auto engine = MakeEngine(options);
  const GenerationResult r = RunPair(*engine, WithDoc(0, 5, 3, 2), WithDoc(2, 10, 4, 4));
  EXPECT_EQ(r.num_shifted_hit_tokens, kDocLength - 3);
  EXPECT_EQ(r.output_tokens.size(), 4u);
  ExpectAllBlocksAvailable(*engine);
}

TEST_F(EngineChunkReuseTest, ChunkCoveringTheLastPromptTokenLeavesItComputed) {
  auto engine = MakeEngine(Options(ChunkReuseMode::kReRotate));
  const GenerationResult r = RunPair(*engine, WithDoc(0, 5, 0, 2), WithDoc(2, 7, 0, 4));
  EXPECT_EQ(r.num_shifted_hit_tokens, kDocLength - 1);
  EXPECT_EQ(r.output_tokens.size(), 4u);
  ExpectAllBlocksAvailable(*engine);
}

TEST_F(EngineChunkReuseTest, BadChunksAndOptionsAreInvalidArgument) {
  auto engine = MakeEngine(Options(ChunkReuseMode::kReRotate));
  GenerationRequest r = WithDoc(0, 5, 3, 2);
  for (std::vector<PromptChunk> chunks :
       {std::vector<PromptChunk>{{.offset = 20, .length = 10}},
        std::vector<PromptChunk>{{.offset = 2, .length = 0}},
        std::vector<PromptChunk>{{.offset = 4, .length = 4}, {.offset = 6, .length = 2}},
        std::vector<PromptChunk>{{.offset = -1, .length = 2}}}) {
    r.chunks = chunks;
    EXPECT_EQ(engine->AddRequest(r).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(engine->HasUnfinishedRequests());
  EngineOptions bad = Options(ChunkReuseMode::kReRotate);
  bad.chunk_reuse.first_k = -1;
  EXPECT_EQ(Engine::Create(weights_, bad).status().code(), absl::StatusCode::kInvalidArgument);
  for (const ChunkReuseMode mode : {ChunkReuseMode::kReRotate, ChunkReuseMode::kOff}) {
    bad = Options(mode);
    bad.chunk_reuse.float_keys_memory = mode == ChunkReuseMode::kOff ? 1 << 20 : -1;
    const absl::Status status = Engine::Create(weights_, bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("float_keys_memory"), std::string::npos) << status;
  }
}

}  // namespace
}  // namespace pagedkv
