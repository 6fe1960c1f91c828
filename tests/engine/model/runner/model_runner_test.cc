// Copyright 2026 The pagedkv Authors.
#include "engine/model/runner/model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"
#include "tests/engine/model/tiny_llama2c.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::ReferenceForward;
using ::pagedkv::testing::TinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;
using ::testing::HasSubstr;

// A sequence's slice of one step: tokens [begin, end) of `tokens` over block table `table`.
struct SeqChunk {
  const std::vector<int32_t>* tokens;
  int32_t begin;
  int32_t end;
  std::vector<BlockId> table;
};

// Owns the arrays a ModelInput points into.
struct Batch {
  std::vector<TokenId> ids;
  std::vector<int32_t> positions, qsl, kv_lens, logits_indices;
  std::vector<int64_t> slots;
  std::vector<BlockId> tables;
  int32_t max_blocks = 0;

  // Every token's logits are requested.
  Batch(const std::vector<SeqChunk>& seqs, int32_t block_size) {
    qsl.push_back(0);
    for (const SeqChunk& s : seqs) max_blocks = std::max<int32_t>(max_blocks, s.table.size());
    for (const SeqChunk& s : seqs) {
      for (int32_t p = s.begin; p < s.end; ++p) {
        logits_indices.push_back(static_cast<int32_t>(ids.size()));
        ids.push_back((*s.tokens)[static_cast<size_t>(p)]);
        positions.push_back(p);
        slots.push_back(int64_t{s.table[static_cast<size_t>(p / block_size)]} * block_size +
                        p % block_size);
      }
      qsl.push_back(static_cast<int32_t>(ids.size()));
      kv_lens.push_back(s.end);
      std::vector<BlockId> row = s.table;
      row.resize(static_cast<size_t>(max_blocks), 0);
      tables.insert(tables.end(), row.begin(), row.end());
    }
  }
  ModelInput Input() const {
    return ModelInput{.token_ids = ids,
                      .positions = positions,
                      .slot_mapping = slots,
                      .query_start_loc = qsl,
                      .kv_lens = kv_lens,
                      .block_tables = tables,
                      .max_blocks_per_seq = max_blocks,
                      .logits_indices = logits_indices};
  }
};

std::shared_ptr<const ModelWeights> LoadThroughFile(const TinyLlama2c& m) {
  const auto path = WriteTempFile("runner_model.bin", m.FileBytes());
  absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
  EXPECT_TRUE(w.ok()) << w.status();
  return std::make_shared<const ModelWeights>(std::move(w).value());
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// A shuffled set of distinct blocks, so logical and physical order differ.
std::vector<BlockId> ShuffledBlocks(int count, int num_blocks, uint32_t seed) {
  std::vector<BlockId> all(static_cast<size_t>(num_blocks));
  std::iota(all.begin(), all.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(count));
  return all;
}

void ExpectLogitsNear(const std::vector<float>& got, size_t row, const std::vector<double>& want,
                      double rel_tol, const char* what) {
  double scale = 1.0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[row * want.size() + i] - want[i]));
  }
  EXPECT_LE(worst, rel_tol * scale) << what << " row " << row;
}

class ModelRunnerTest : public ::testing::TestWithParam<bool> {};

TEST_P(ModelRunnerTest, PrefillLogitsMatchReferenceAtEveryPosition) {
  TinyShape shape;
  shape.shared_classifier = GetParam();
  const TinyLlama2c m = MakeTinyLlama2c(shape, 21);
  auto runner = ModelRunner::Create(
      LoadThroughFile(m), {.backend = BackendKind::kCpu, .num_blocks = 32, .block_size = 4});
  ASSERT_TRUE(runner.ok()) << runner.status();
  const std::vector<int32_t> tokens = RandomTokens(40, shape.vocab_size, 5);
  const auto want = ReferenceForward(m).Logits(tokens);
  Batch batch({{&tokens, 0, 40, ShuffledBlocks(10, 32, 3)}}, 4);
  ModelOutput out;
  ASSERT_TRUE((*runner)->Forward(batch.Input(), {.return_logits = true}, &out).ok());
  ASSERT_EQ(out.logits.size(), 40u * shape.vocab_size);
  for (size_t t = 0; t < tokens.size(); ++t)
    ExpectLogitsNear(out.logits, t, want[t], 1e-4, "prefill");
}

TEST_P(ModelRunnerTest, ChunkedPrefillAtAnyChunkSizeGivesTheSameLogits) {
  TinyShape shape;
  shape.shared_classifier = GetParam();
  const TinyLlama2c m = MakeTinyLlama2c(shape, 22);
  auto weights = LoadThroughFile(m);
  const std::vector<int32_t> tokens = RandomTokens(23, shape.vocab_size, 6);
  const auto want = ReferenceForward(m).Logits(tokens);
  for (int chunk = 1; chunk <= 23; ++chunk) {
    auto runner = ModelRunner::Create(
        weights, {.backend = BackendKind::kCpu, .num_blocks = 16, .block_size = 4});
    ASSERT_TRUE(runner.ok());
    const std::vector<BlockId> table = ShuffledBlocks(6, 16, static_cast<uint32_t>(chunk));
    for (int begin = 0; begin < 23; begin += chunk) {
      const int end = std::min(23, begin + chunk);
      Batch batch({{&tokens, begin, end, table}}, 4);
      ModelOutput out;
      ASSERT_TRUE((*runner)->Forward(batch.Input(), {.return_logits = true}, &out).ok());
      for (int t = begin; t < end; ++t) {
        ExpectLogitsNear(out.logits, static_cast<size_t>(t - begin), want[static_cast<size_t>(t)],
                         1e-4, "chunked");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedAndSeparateClassifier, ModelRunnerTest, ::testing::Bool());

TEST(ModelRunnerBatchTest, MixedBatchOfSequencesMatchesEachAlone) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 23);
  auto runner = ModelRunner::Create(
      LoadThroughFile(m), {.backend = BackendKind::kCpu, .num_blocks = 64, .block_size = 4});
  ASSERT_TRUE(runner.ok());
  ReferenceForward ref(m);
  const std::vector<int32_t> a = RandomTokens(17, 64, 1), b = RandomTokens(9, 64, 2),
                             c = RandomTokens(30, 64, 3);
  const std::vector<BlockId> blocks = ShuffledBlocks(5 + 3 + 8, 64, 9);
  const std::vector<BlockId> ta(blocks.begin(), blocks.begin() + 5),
      tb(blocks.begin() + 5, blocks.begin() + 8), tc(blocks.begin() + 8, blocks.end());
  // Step 1: a's first 16 tokens, b's first 8, c's first 20.
  ModelOutput out;
  ASSERT_TRUE(
      (*runner)
          ->Forward(Batch({{&a, 0, 16, ta}, {&b, 0, 8, tb}, {&c, 0, 20, tc}}, 4).Input(), {}, &out)
          .ok());
  // Step 2: a decodes its last token, b its last, c prefills 10 more: mixed decode and prefill.
  Batch step2({{&a, 16, 17, ta}, {&b, 8, 9, tb}, {&c, 20, 30, tc}}, 4);
  ASSERT_TRUE((*runner)->Forward(step2.Input(), {.return_logits = true}, &out).ok());
  ExpectLogitsNear(out.logits, 0, ref.Logits(a)[16], 1e-4, "a");
  ExpectLogitsNear(out.logits, 1, ref.Logits(b)[8], 1e-4, "b");
  const auto want_c = ref.Logits(c);
  for (size_t t = 0; t < 10; ++t) ExpectLogitsNear(out.logits, 2 + t, want_c[20 + t], 1e-4, "c");
}

TEST(ModelRunnerBatchTest, ReducedPrecisionKvStaysClose) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 24);
  const std::vector<int32_t> tokens = RandomTokens(20, 64, 8);
  const auto want = ReferenceForward(m).Logits(tokens);
  auto weights = LoadThroughFile(m);
  // Relative logit tolerance per dtype (head_dim 8: int8 and fp8 rows with one scale each;
  // measured 2.0e-3 and 1.1e-2).
  const std::pair<DType, double> dtypes[] = {
      {DType::kF16, 5e-3}, {DType::kBF16, 4e-2}, {DType::kInt8, 6e-3}, {DType::kFp8E4M3, 3e-2}};
  for (const auto& [dtype, tolerance] : dtypes) {
    auto runner = ModelRunner::Create(
        weights,
        {.backend = BackendKind::kCpu, .num_blocks = 8, .block_size = 8, .kv_dtype = dtype});
    ASSERT_TRUE(runner.ok());
    Batch batch({{&tokens, 0, 20, {3, 0, 5}}}, 8);
    ModelOutput out;
    ASSERT_TRUE((*runner)->Forward(batch.Input(), {.return_logits = true}, &out).ok());
    for (size_t t = 0; t < tokens.size(); ++t) {
      ExpectLogitsNear(out.logits, t, want[t], tolerance, DTypeName(dtype));
    }
  }
}

TEST(ModelRunnerBatchTest, GreedySamplingPicksTheArgmax) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 25);
  auto runner = ModelRunner::Create(
      LoadThroughFile(m), {.backend = BackendKind::kCpu, .num_blocks = 8, .block_size = 4});
  ASSERT_TRUE(runner.ok());
  const std::vector<int32_t> tokens = RandomTokens(7, 64, 4);
  const auto want = ReferenceForward(m).Logits(tokens);
  Batch batch({{&tokens, 0, 7, {1, 2}}}, 4);
  batch.logits_indices = {6, 2};
  const SamplingParams greedy[2] = {{}, {}};
  ModelOutput out;
  ASSERT_TRUE((*runner)->Forward(batch.Input(), {.sampling = greedy}, &out).ok());
  ASSERT_EQ(out.sampled.size(), 2u);
  EXPECT_TRUE(out.logits.empty());
  auto argmax = [](const std::vector<double>& v) {
    return static_cast<TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  EXPECT_EQ(out.sampled[0], argmax(want[6]));
  EXPECT_EQ(out.sampled[1], argmax(want[2]));
}

TEST(ModelRunnerBatchTest, BadInputIsRejectedBeforeAnyKvWrite) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 26);
  auto runner = ModelRunner::Create(
      LoadThroughFile(m), {.backend = BackendKind::kCpu, .num_blocks = 8, .block_size = 4});
  ASSERT_TRUE(runner.ok());
  const std::vector<int32_t> tokens = RandomTokens(6, 64, 4);
  std::vector<float> k_before, v_before, k_after, v_after;
  const std::vector<int64_t> all_slots = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  ASSERT_TRUE((*runner)->ReadKv(0, all_slots, &k_before, &v_before).ok());
  struct Case {
    const char* expected;
    void (*mutate)(Batch&);
  };
  const Case cases[] = {
      {"token_ids[2]", [](Batch& b) { b.ids[2] = 64; }},
      {"disagrees with the block table", [](Batch& b) { b.slots[1] = 7; }},
      {"slot_mapping[0]", [](Batch& b) { b.slots[0] = 32; }},
      {"kv_lens[0]", [](Batch& b) { b.kv_lens[0] = 9; }},
      {"positions[5]", [](Batch& b) { b.kv_lens[0] = 5; }},
      {"entry 1", [](Batch& b) { b.tables[1] = 8; }},
      {"query_start_loc", [](Batch& b) { b.qsl[1] = 5; }},
      {"logits_indices[0]", [](Batch& b) { b.logits_indices[0] = 6; }},
  };
  for (const Case& c : cases) {
    Batch batch({{&tokens, 0, 6, {0, 2}}}, 4);
    c.mutate(batch);
    ModelOutput out;
    absl::Status s = (*runner)->Forward(batch.Input(), {.return_logits = true}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(s.message(), HasSubstr(c.expected));
  }
  ASSERT_TRUE((*runner)->ReadKv(0, all_slots, &k_after, &v_after).ok());
  EXPECT_EQ(k_before, k_after);
  EXPECT_EQ(v_before, v_after);
  // Sampling params must match the logits rows.
  Batch batch({{&tokens, 0, 6, {0, 2}}}, 4);
  const SamplingParams one[1] = {{}};
  ModelOutput out;
  EXPECT_EQ((*runner)->Forward(batch.Input(), {.sampling = one}, &out).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelRunnerBatchTest, ReadKvReturnsTheLayerZeroValues) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 27);
  auto runner = ModelRunner::Create(
      LoadThroughFile(m), {.backend = BackendKind::kCpu, .num_blocks = 8, .block_size = 4});
  ASSERT_TRUE(runner.ok());
  const std::vector<int32_t> tokens = {5};
  Batch batch({{&tokens, 0, 1, {6}}}, 4);
  ModelOutput out;
  ASSERT_TRUE((*runner)->Forward(batch.Input(), {}, &out).ok());
  std::vector<float> k, v;
  ASSERT_TRUE((*runner)->ReadKv(0, {24}, &k, &v).ok());
  // Layer-0 V of token 5 = wv * rmsnorm(embedding[5]) (no rotation on V).
  const int d = 32, kvd = 16;
  double ss = 0;
  for (int i = 0; i < d; ++i) ss += std::pow(m.token_embedding[5 * d + i], 2);
  const double inv = 1.0 / std::sqrt(ss / d + 1e-5);
  for (int r = 0; r < kvd; ++r) {
    double acc = 0;
    for (int i = 0; i < d; ++i) {
      acc += m.wv[static_cast<size_t>(r * d + i)] * m.rms_att[static_cast<size_t>(i)] *
             m.token_embedding[static_cast<size_t>(5 * d + i)] * inv;
    }
    EXPECT_NEAR(v[static_cast<size_t>(r)], acc, 1e-5);
  }
  EXPECT_EQ((*runner)->ReadKv(0, {32}, &k, &v).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*runner)->ReadKv(2, {0}, &k, &v).code(), absl::StatusCode::kInvalidArgument);
}

// ForwardOptions::key_rows hands back each asked row's keys as the KV write rotated them: the
// f32 pages' keys bit for bit, which an int8 cache stores rounded (layer 0, where both runs
// compute the same keys). Bad rows are refused before anything is written.
TEST(ModelRunnerBatchTest, KeyRowsHandBackTheRotatedKeys) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 28);
  auto weights = LoadThroughFile(m);
  const std::vector<int32_t> tokens = RandomTokens(10, 64, 9);
  const std::vector<int32_t> rows = {1, 4, 9};
  std::vector<float> layer0[2];
  for (DType dtype : {DType::kF32, DType::kInt8}) {
    auto runner = ModelRunner::Create(
        weights,
        {.backend = BackendKind::kCpu, .num_blocks = 8, .block_size = 4, .kv_dtype = dtype});
    ASSERT_TRUE(runner.ok());
    const ModelConfig& c = (*runner)->config();
    const auto width = static_cast<size_t>(c.kv_dim());
    Batch batch({{&tokens, 0, 10, {2, 0, 5}}}, 4);
    ModelOutput out;
    ASSERT_TRUE((*runner)->Forward(batch.Input(), {.key_rows = rows}, &out).ok());
    ASSERT_EQ(out.rotated_keys.size(), c.n_layers * rows.size() * width);
    std::vector<int64_t> slots;
    for (int32_t r : rows) slots.push_back(batch.slots[static_cast<size_t>(r)]);
    for (int32_t l = 0; l < c.n_layers; ++l) {
      std::vector<float> k, v;
      ASSERT_TRUE((*runner)->ReadKv(l, slots, &k, &v).ok());
      const auto first = out.rotated_keys.begin() + l * rows.size() * width;
      const std::vector<float> handed(first, first + rows.size() * width);
      if (l == 0) layer0[dtype == DType::kInt8] = handed;
      if (dtype == DType::kF32) {
        EXPECT_EQ(handed, k) << "layer " << l;
        continue;
      }
      double worst = 0, amax = 0;
      for (size_t i = 0; i < k.size(); ++i) {
        worst = std::max<double>(worst, std::abs(handed[i] - k[i]));
        amax = std::max<double>(amax, std::abs(handed[i]));
      }
      EXPECT_GT(worst, 0.0) << "layer " << l << ": the pages hold the keys rounded";
      EXPECT_LE(worst, amax / 127.0) << "layer " << l;  // within one int8 step of the row
    }
  }
  EXPECT_EQ(layer0[0], layer0[1]);

  auto runner = ModelRunner::Create(
      weights, {.backend = BackendKind::kCpu, .num_blocks = 8, .block_size = 4});
  ASSERT_TRUE(runner.ok());
  std::vector<float> k_before, v_before, k_after, v_after;
  const std::vector<int64_t> all_slots = {8, 9, 10, 11, 0, 1};
  ASSERT_TRUE((*runner)->ReadKv(0, all_slots, &k_before, &v_before).ok());
  const std::pair<std::vector<int32_t>, const char*> bad[] = {
      {{4, 1}, "key_rows[1] = 1 is not a strictly increasing row"},
      {{10}, "key_rows[0] = 10 is not a strictly increasing row in [0, 10)"},
      {{2, 3}, "key_rows[1] = 3 has no slot"}};
  for (const auto& [key_rows, message] : bad) {
    Batch batch({{&tokens, 0, 10, {2, 0, 5}}}, 4);
    batch.slots[3] = -1;
    ModelOutput out;
    const absl::Status s = (*runner)->Forward(batch.Input(), {.key_rows = key_rows}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(s.message(), HasSubstr(message));
  }
  ASSERT_TRUE((*runner)->ReadKv(0, all_slots, &k_after, &v_after).ok());
  EXPECT_EQ(k_before, k_after);
  EXPECT_EQ(v_before, v_after);
}

TEST(ModelRunnerCudaTest, CudaBackendMatchesTheReference) {
  if (!CudaBackendAvailable()) GTEST_SKIP() << "no CUDA backend (not built with CUDA or no device)";
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 29);
  auto runner = ModelRunner::Create(
      LoadThroughFile(m), {.backend = BackendKind::kCuda, .num_blocks = 16, .block_size = 4});
  ASSERT_TRUE(runner.ok()) << runner.status();
  const std::vector<int32_t> tokens = RandomTokens(30, 64, 12);
  const auto want = ReferenceForward(m).Logits(tokens);
  // Prefill 20 tokens, then decode the rest one at a time, sampling greedily on the device.
  const std::vector<BlockId> table = ShuffledBlocks(8, 16, 13);
  ModelOutput out;
  Batch prefill({{&tokens, 0, 20, table}}, 4);
  ASSERT_TRUE((*runner)->Forward(prefill.Input(), {.return_logits = true}, &out).ok());
  for (size_t t = 0; t < 20; ++t) ExpectLogitsNear(out.logits, t, want[t], 1e-4, "cuda prefill");
  for (int32_t p = 20; p < 30; ++p) {
    Batch step({{&tokens, p, p + 1, table}}, 4);
    const SamplingParams greedy[1] = {{}};
    ASSERT_TRUE(
        (*runner)->Forward(step.Input(), {.return_logits = true, .sampling = greedy}, &out).ok());
    ExpectLogitsNear(out.logits, 0, want[static_cast<size_t>(p)], 1e-4, "cuda decode");
    const auto& row = want[static_cast<size_t>(p)];
    EXPECT_EQ(out.sampled[0], std::max_element(row.begin(), row.end()) - row.begin());
  }
}

// Quantized KV pages on the CUDA backend give the CPU backend's logits (prefill, then decode):
// both quantize with kv_quant.h; a rotated key an ulp apart may round one step apart.
TEST(ModelRunnerCudaTest, QuantizedKvMatchesTheCpuBackend) {
  if (!CudaBackendAvailable()) GTEST_SKIP() << "no CUDA backend (not built with CUDA or no device)";
  TinyShape shape;
  shape.dim = 128;  // head_dim 32: every quantized dtype, the GGUF blocks included
  shape.hidden_dim = 256;
  const TinyLlama2c m = MakeTinyLlama2c(shape, 31);
  auto weights = LoadThroughFile(m);
  const std::vector<int32_t> tokens = RandomTokens(30, 64, 14);
  const std::vector<BlockId> table = ShuffledBlocks(8, 16, 15);
  // Each quantized dtype for K and V, and K and V in different dtypes (llama.cpp's -ctk / -ctv).
  const std::pair<DType, DType> kv_dtypes[] = {
      {DType::kInt8, DType::kInt8},       {DType::kFp8E4M3, DType::kFp8E4M3},
      {DType::kFp8E5M2, DType::kFp8E5M2}, {DType::kQ8_0, DType::kQ8_0},
      {DType::kQ4_0, DType::kQ4_0},       {DType::kQ4_1, DType::kQ4_1},
      {DType::kQ8_0, DType::kQ4_0},       {DType::kBF16, DType::kInt8}};
  for (const auto& [dtype, v_dtype] : kv_dtypes) {
    std::vector<float> logits[2];
    for (BackendKind backend : {BackendKind::kCpu, BackendKind::kCuda}) {
      auto runner = ModelRunner::Create(weights, {.backend = backend,
                                                  .num_blocks = 16,
                                                  .block_size = 4,
                                                  .kv_dtype = dtype,
                                                  .kv_dtype_v = v_dtype});
      ASSERT_TRUE(runner.ok()) << runner.status();
      std::vector<float>& all = logits[backend == BackendKind::kCuda];
      ModelOutput out;
      Batch prefill({{&tokens, 0, 20, table}}, 4);
      ASSERT_TRUE((*runner)->Forward(prefill.Input(), {.return_logits = true}, &out).ok());
      all = out.logits;
      for (int32_t p = 20; p < 30; ++p) {
        Batch step({{&tokens, p, p + 1, table}}, 4);
        ASSERT_TRUE((*runner)->Forward(step.Input(), {.return_logits = true}, &out).ok());
        all.insert(all.end(), out.logits.begin(), out.logits.end());
      }
    }
    const size_t vocab = static_cast<size_t>(shape.vocab_size);
    for (size_t row = 0; row < 30; ++row) {
      const std::vector<double> cpu(logits[0].begin() + row * vocab,
                                    logits[0].begin() + (row + 1) * vocab);
      ExpectLogitsNear(logits[1], row, cpu, 2e-2, KvDTypesName(dtype, v_dtype).c_str());
    }
  }
}

// A model big enough that the CPU backend splits its Linear, attention and norms over threads (a
// layer's 2.25 MB of weights is past the split pass's limit); `small` halves it (0.56 MB a layer),
// so steps of several sequences run in parts.
std::shared_ptr<const ModelWeights> ThreadedModel(bool small = false) {
  ModelConfig c{.dim = small ? 128 : 256,
                .hidden_dim = small ? 256 : 512,
                .n_layers = 2,
                .n_heads = 8,
                .n_kv_heads = 4,
                .vocab_size = 1024,
                .seq_len = 128};
  absl::StatusOr<ModelWeights> w = ModelWeights::Random(c, {.seed = 16});
  EXPECT_TRUE(w.ok()) << w.status();
  return std::make_shared<const ModelWeights>(std::move(w).value());
}

struct ThreadedRun {
  std::vector<float> logits;    // every step's logits rows, concatenated
  std::vector<TokenId> greedy;  // every step's greedy ids
  int32_t max_parts = 0;        // most parts a step ran in
};

// Prefills a (40 tokens), b (30) and c (20) in one batch, then decodes 4 greedy steps of all
// three; `only_a` runs sequence a alone (same blocks) to check that batching changes nothing.
ThreadedRun RunThreaded(std::shared_ptr<const ModelWeights> w, int32_t threads, bool only_a) {
  ThreadedRun run;
  auto runner = ModelRunner::Create(
      w, {.backend = BackendKind::kCpu, .num_blocks = 64, .block_size = 8, .num_threads = threads});
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return run;
  std::vector<std::vector<int32_t>> tokens = {RandomTokens(40, 1024, 5), RandomTokens(30, 1024, 6),
                                              RandomTokens(20, 1024, 7)};
  const std::vector<std::vector<BlockId>> tables = {
      {0, 1, 2, 3, 4, 5}, {8, 9, 10, 11, 12}, {16, 17, 18, 19}};
  const size_t num_seqs = only_a ? 1 : 3;
  std::vector<int32_t> begin(num_seqs, 0);
  for (int step = 0; step < 5; ++step) {
    std::vector<SeqChunk> chunks;
    for (size_t s = 0; s < num_seqs; ++s) {
      chunks.push_back({&tokens[s], begin[s], static_cast<int32_t>(tokens[s].size()), tables[s]});
    }
    Batch batch(chunks, 8);
    batch.logits_indices.clear();
    for (size_t s = 0; s < num_seqs; ++s) batch.logits_indices.push_back(batch.qsl[s + 1] - 1);
    const std::vector<SamplingParams> greedy(num_seqs);
    ModelOutput out;
    const absl::Status status =
        (*runner)->Forward(batch.Input(), {.return_logits = true, .sampling = greedy}, &out);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return run;
    run.logits.insert(run.logits.end(), out.logits.begin(), out.logits.end());
    run.greedy.insert(run.greedy.end(), out.sampled.begin(), out.sampled.end());
    run.max_parts = std::max(run.max_parts, (*runner)->last_forward_parts());
    for (size_t s = 0; s < num_seqs; ++s) {
      begin[s] = static_cast<int32_t>(tokens[s].size());
      tokens[s].push_back(out.sampled[s]);
    }
  }
  return run;
}

TEST(ModelRunnerThreadsTest, LogitsAreBitIdenticalForAnyThreadCount) {
  const auto w = ThreadedModel();
  const ThreadedRun one = RunThreaded(w, 1, false);
  ASSERT_EQ(one.greedy.size(), 15u);
  for (int32_t threads : {2, 3, 0}) {
    const ThreadedRun run = RunThreaded(w, threads, false);
    EXPECT_EQ(run.greedy, one.greedy) << threads << " threads";
    ASSERT_EQ(run.logits.size(), one.logits.size());
    EXPECT_EQ(std::memcmp(run.logits.data(), one.logits.data(), one.logits.size() * sizeof(float)),
              0)
        << threads << " threads";
  }
}

TEST(ModelRunnerThreadsTest, SplitStepsAreBitIdenticalForAnyThreadCount) {
  const auto w = ThreadedModel(/*small=*/true);
  const ThreadedRun one = RunThreaded(w, 1, false);
  ASSERT_EQ(one.greedy.size(), 15u);
  EXPECT_EQ(one.max_parts, 1);
  for (int32_t threads : {2, 3}) {
    const ThreadedRun run = RunThreaded(w, threads, false);
    EXPECT_EQ(run.max_parts, threads);
    EXPECT_EQ(run.greedy, one.greedy) << threads << " threads";
    ASSERT_EQ(run.logits.size(), one.logits.size());
    EXPECT_EQ(std::memcmp(run.logits.data(), one.logits.data(), one.logits.size() * sizeof(float)),
              0)
        << threads << " threads";
  }
  EXPECT_EQ(RunThreaded(ThreadedModel(), 2, false).max_parts, 1) << "a big model splits its ops";
}

TEST(ModelRunnerThreadsTest, ASequencesLogitsDoNotDependOnItsBatch) {
  const auto w = ThreadedModel();
  const ThreadedRun batched = RunThreaded(w, 2, false);
  const ThreadedRun alone = RunThreaded(w, 2, true);
  const size_t vocab = 1024;
  ASSERT_EQ(alone.logits.size(), 5 * vocab);
  ASSERT_EQ(batched.logits.size(), 15 * vocab);
  for (size_t step = 0; step < 5; ++step) {
    // Sequence a is row 0 of each batched step's three logits rows.
    EXPECT_EQ(std::memcmp(alone.logits.data() + step * vocab,
                          batched.logits.data() + step * 3 * vocab, vocab * sizeof(float)),
              0)
        << "step " << step;
    EXPECT_EQ(alone.greedy[step], batched.greedy[step * 3]);
  }
}

// The split pass (several sequences on a CPU backend with threads): sequence 0 reads, in the same
// step, the KV of blocks that sequence 1 writes (a same-step prefix hit across parts, the reader
// in the part that starts first). Every part writes a layer's K/V before any attends in it.
TEST(ModelRunnerThreadsTest, ASplitStepReadsKvThatAnotherPartWritesInTheSameStep) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 31);
  const auto weights = LoadThroughFile(m);
  const int32_t vocab = m.shape.vocab_size;
  const std::vector<int32_t> writer = RandomTokens(24, vocab, 32);
  std::vector<int32_t> reader(writer.begin(), writer.begin() + 16);  // blocks 0-3 shared
  const std::vector<int32_t> own = RandomTokens(14, vocab, 33);
  reader.insert(reader.end(), own.begin(), own.end());
  const std::vector<BlockId> writer_table = {3, 9, 4, 7, 12, 1};
  const std::vector<BlockId> reader_table = {3, 9, 4, 7, 10, 15, 2, 6};
  Batch batch({{&reader, 16, 30, reader_table}, {&writer, 0, 24, writer_table}}, 4);
  std::vector<float> logits[2];
  for (int32_t threads : {1, 2}) {
    auto runner = ModelRunner::Create(
        weights,
        {.backend = BackendKind::kCpu, .num_blocks = 16, .block_size = 4, .num_threads = threads});
    ASSERT_TRUE(runner.ok()) << runner.status();
    ModelOutput out;
    ASSERT_TRUE((*runner)->Forward(batch.Input(), {.return_logits = true}, &out).ok());
    EXPECT_EQ((*runner)->last_forward_parts(), threads);
    logits[threads - 1] = out.logits;
  }
  ASSERT_EQ(logits[1].size(), logits[0].size());
  EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)), 0);
  const auto want_reader = ReferenceForward(m).Logits(reader);
  const auto want_writer = ReferenceForward(m).Logits(writer);
  for (size_t r = 0; r < 14; ++r) {
    ExpectLogitsNear(logits[1], r, want_reader[16 + r], 1e-4, "reader");
  }
  for (size_t r = 0; r < 24; ++r)
    ExpectLogitsNear(logits[1], 14 + r, want_writer[r], 1e-4, "writer");
}

TEST(ModelRunnerThreadsTest, BadThreadCountsAreInvalidArgument) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 29);
  auto weights = LoadThroughFile(m);
  for (int32_t threads : {-1, 1025}) {
    absl::StatusOr<std::unique_ptr<ModelRunner>> r = ModelRunner::Create(
        weights, {.backend = BackendKind::kCpu, .num_blocks = 4, .num_threads = threads});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << threads;
    EXPECT_THAT(r.status().message(), HasSubstr("num_threads"));
  }
}

TEST(ModelRunnerOptionsTest, BadOptionsAreInvalidArgument) {
  const TinyLlama2c m = MakeTinyLlama2c(TinyShape{}, 28);
  auto weights = LoadThroughFile(m);
  EXPECT_EQ(
      ModelRunner::Create(weights, {.backend = BackendKind::kCpu, .num_blocks = 0}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ModelRunner::Create(weights, {.backend = BackendKind::kCpu, .num_blocks = 4, .block_size = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  RopeConfig rope = DefaultRopeConfig(weights->config());
  rope.head_dim = 16;
  absl::StatusOr<std::unique_ptr<ModelRunner>> r =
      ModelRunner::Create(weights, {.backend = BackendKind::kCpu, .num_blocks = 4, .rope = rope});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("head_dim"));
  EXPECT_EQ(ModelRunner::Create(nullptr, {.num_blocks = 4}).status().code(),
            absl::StatusCode::kInvalidArgument);
  if (!CudaBackendAvailable()) {
    EXPECT_EQ(ModelRunner::Create(weights, {.backend = BackendKind::kCuda, .num_blocks = 4})
                  .status()
                  .code(),
              absl::StatusCode::kUnavailable);
  }
}

TEST(ModelRunnerOptionsTest, ContextLengthFollowsTheRopeScaling) {
  ModelConfig c{.dim = 32,
                .hidden_dim = 48,
                .n_layers = 1,
                .n_heads = 4,
                .n_kv_heads = 4,
                .vocab_size = 16,
                .seq_len = 100};
  RopeConfig rope = DefaultRopeConfig(c);
  EXPECT_EQ(rope.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(rope.head_dim, 8);
  EXPECT_EQ(ContextLengthFor(c, rope), 100);
  rope.scaling = RopeScaling::kLinear;
  rope.factor = 4;
  EXPECT_EQ(ContextLengthFor(c, rope), 400);
  rope.scaling = RopeScaling::kYarn;
  rope.max_position_embeddings = 1000;
  EXPECT_EQ(ContextLengthFor(c, rope), 1000);
  rope.scaling = RopeScaling::kDynamicNtk;
  rope.dynamic_seq_len = 250;
  EXPECT_EQ(ContextLengthFor(c, rope), 250);
  rope.dynamic_seq_len = 0;  // per step (Hugging Face's dynamic): seq_len * factor
  EXPECT_EQ(ContextLengthFor(c, rope), 400);
}

}  // namespace
}  // namespace pagedkv
