// Copyright 2026 The pagedkv Authors.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_weights.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MakeTinyLlama2c;
using ::pagedkv::testing::TinyLlama2c;
using ::pagedkv::testing::TinyShape;
using ::pagedkv::testing::WriteTempFile;
using ::testing::HasSubstr;
using ::testing::Not;

void SetHeaderInt(std::string& bytes, int index, int32_t value) {
  std::memcpy(bytes.data() + 4 * index, &value, sizeof(value));
}

TEST(Llama2cCheckpointTest, LoadsEveryTensorAtItsOffset) {
  for (bool shared : {true, false}) {
    TinyShape shape;
    shape.shared_classifier = shared;
    const TinyLlama2c m = MakeTinyLlama2c(shape, 11);
    const auto path = WriteTempFile("weights.bin", m.FileBytes());
    absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
    ASSERT_TRUE(w.ok()) << w.status();
    const ModelConfig& c = w->config();
    EXPECT_EQ(c.dim, shape.dim);
    EXPECT_EQ(c.hidden_dim, shape.hidden_dim);
    EXPECT_EQ(c.n_layers, shape.n_layers);
    EXPECT_EQ(c.n_heads, shape.n_heads);
    EXPECT_EQ(c.n_kv_heads, shape.n_kv_heads);
    EXPECT_EQ(c.vocab_size, shape.vocab_size);
    EXPECT_EQ(c.seq_len, shape.seq_len);
    EXPECT_EQ(c.shared_classifier, shared);
    auto same = [](const float* got, const std::vector<float>& want, size_t offset, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        if (got[i] != want[offset + i]) return false;
      }
      return true;
    };
    const size_t d = 32, kv = 16, h = 48, v = 64;
    EXPECT_TRUE(same(w->token_embedding(), m.token_embedding, 0, v * d));
    EXPECT_TRUE(same(w->rms_final(), m.rms_final, 0, d));
    EXPECT_TRUE(same(w->classifier(), m.classifier(), 0, v * d));
    EXPECT_EQ(w->classifier() == w->token_embedding(), shared);
    for (size_t l = 0; l < 2; ++l) {
      const LayerWeights& lw = w->layer(static_cast<int>(l));
      EXPECT_TRUE(same(lw.rms_att, m.rms_att, l * d, d));
      EXPECT_TRUE(same(lw.wq, m.wq, l * d * d, d * d));
      EXPECT_TRUE(same(lw.wk, m.wk, l * kv * d, kv * d));
      EXPECT_TRUE(same(lw.wv, m.wv, l * kv * d, kv * d));
      EXPECT_TRUE(same(lw.wo, m.wo, l * d * d, d * d));
      EXPECT_TRUE(same(lw.rms_ffn, m.rms_ffn, l * d, d));
      EXPECT_TRUE(same(lw.w1, m.w1, l * h * d, h * d));
      EXPECT_TRUE(same(lw.w2, m.w2, l * d * h, d * h));
      EXPECT_TRUE(same(lw.w3, m.w3, l * h * d, h * d));
    }
  }
}

TEST(Llama2cCheckpointTest, MissingFileIsNotFound) {
  absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c("/nonexistent/dir/model.bin");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/dir/model.bin"));
}

TEST(Llama2cCheckpointTest, EveryTruncationIsInvalidArgumentNamingTheFile) {
  const std::string bytes = MakeTinyLlama2c(TinyShape{}, 3).FileBytes();
  for (size_t cut : {size_t{0}, size_t{3}, size_t{27}, size_t{28}, size_t{29}, bytes.size() / 2,
                     bytes.size() - 4, bytes.size() - 1}) {
    const auto path = WriteTempFile("truncated.bin", bytes.substr(0, cut));
    absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
    ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut;
    EXPECT_THAT(w.status().message(), HasSubstr(path.string()));
    EXPECT_THAT(w.status().message(), HasSubstr(cut < 28 ? "header" : "truncated"));
  }
}

TEST(Llama2cCheckpointTest, TrailingBytesAreRejected) {
  const std::string bytes = MakeTinyLlama2c(TinyShape{}, 3).FileBytes() + "xxxx";
  absl::StatusOr<ModelWeights> w = ModelWeights::ParseLlama2c(bytes, "extra.bin");
  ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("extra.bin"));
  EXPECT_THAT(w.status().message(), HasSubstr("4 bytes after"));
}

TEST(Llama2cCheckpointTest, ImpossibleHeadersNameTheProblem) {
  const std::string good = MakeTinyLlama2c(TinyShape{}, 3).FileBytes();
  struct Case {
    int field;
    int32_t value;
    const char* expected;
  };
  const Case cases[] = {
      {0, 30, "n_heads (4) must divide dim (30)"},
      {4, 3, "n_kv_heads (3) must divide n_heads (4)"},
      {0, 0, "dim must be positive"},
      {1, -5, "hidden_dim must be positive"},
      {2, 0, "n_layers must be positive"},
      {3, 0, "n_heads must be positive"},
      {6, -1, "seq_len must be positive"},
      {5, 0, "vocab_size must be positive"},
      {5, std::numeric_limits<int32_t>::min(), "vocab_size"},
      {3, 32, "must be even"},  // head_dim 1
      {0, 1 << 30, "2^31"},
  };
  for (const Case& c : cases) {
    std::string bytes = good;
    SetHeaderInt(bytes, c.field, c.value);
    absl::StatusOr<ModelWeights> w = ModelWeights::ParseLlama2c(bytes, "bad.bin");
    ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(w.status().message(), HasSubstr("bad.bin"));
    EXPECT_THAT(w.status().message(), HasSubstr("impossible header"));
    EXPECT_THAT(w.status().message(), HasSubstr(c.expected));
  }
}

TEST(Llama2cCheckpointTest, HeaderThatDisagreesWithTheSizeIsRejected) {
  std::string bytes = MakeTinyLlama2c(TinyShape{}, 3).FileBytes();
  SetHeaderInt(bytes, 2, 3);  // claims 3 layers, holds 2
  absl::StatusOr<ModelWeights> w = ModelWeights::ParseLlama2c(bytes, "layers.bin");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("truncated"));
  SetHeaderInt(bytes, 2, 2);
  SetHeaderInt(bytes, 5, -64);  // claims an unshared classifier it does not hold
  w = ModelWeights::ParseLlama2c(bytes, "unshared.bin");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("truncated"));
}

TEST(Llama2cCheckpointTest, NonFiniteWeightIsCorrupt) {
  std::string bytes = MakeTinyLlama2c(TinyShape{}, 3).FileBytes();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + 28 + 4 * 1000, &nan, sizeof(nan));
  absl::StatusOr<ModelWeights> w = ModelWeights::ParseLlama2c(bytes, "nan.bin");
  ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("corrupt"));
  EXPECT_THAT(w.status().message(), HasSubstr("weight 1000"));
}

TEST(Llama2cCheckpointTest, NewerExportFormatIsExplained) {
  std::string bytes = MakeTinyLlama2c(TinyShape{}, 3).FileBytes();
  SetHeaderInt(bytes, 0, 0x616b3432);
  absl::StatusOr<ModelWeights> w = ModelWeights::ParseLlama2c(bytes, "v1.bin");
  ASSERT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("version-1"));
}

TEST(Llama2cCheckpointTest, PayloadSizeMustMatch) {
  ModelConfig config{.dim = 8,
                     .hidden_dim = 16,
                     .n_layers = 1,
                     .n_heads = 2,
                     .n_kv_heads = 1,
                     .vocab_size = 10,
                     .seq_len = 4};
  EXPECT_EQ(ModelWeights::FromLlama2cPayload(config, std::vector<float>(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const int64_t n = ModelWeights::PayloadSize(config);
  // 80 emb + 8 + 64 + 2*32 + 64 + 8 + 3*128 + 8 + 2*(4*2) freq.
  EXPECT_EQ(n, 80 + 8 + 64 + 64 + 64 + 8 + 384 + 8 + 16);
  EXPECT_TRUE(ModelWeights::FromLlama2cPayload(config, std::vector<float>(n)).ok());
}

// An explicit head width: wq is [n_heads * head_dim, dim], wo [dim, n_heads * head_dim], wk/wv
// [n_kv_heads * head_dim, dim]; the payload and the bias sizes follow.
TEST(Llama2cCheckpointTest, ExplicitHeadDimSizesTheAttentionTensors) {
  ModelConfig config{.dim = 8,
                     .hidden_dim = 16,
                     .n_layers = 1,
                     .n_heads = 2,
                     .n_kv_heads = 1,
                     .explicit_head_dim = 6,
                     .vocab_size = 10,
                     .seq_len = 4};
  ASSERT_TRUE(config.Validate().ok()) << config.Validate();
  EXPECT_EQ(config.head_dim(), 6);
  EXPECT_EQ(config.q_dim(), 12);
  EXPECT_EQ(config.kv_dim(), 6);
  // 80 emb + 8 + wq 96 + wk, wv 2*48 + wo 96 + 8 + 3*128 + 8 + freq 2*(4*3).
  EXPECT_EQ(ModelWeights::PayloadSize(config), 80 + 8 + 96 + 96 + 96 + 8 + 384 + 8 + 24);
  config.qkv_bias = true;
  EXPECT_EQ(ModelWeights::QkvBiasSize(config), 12 + 2 * 6);
  absl::StatusOr<ModelWeights> w = ModelWeights::Random(config);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->layer(0).wk - w->layer(0).wq, 96);
  EXPECT_EQ(w->layer(0).bk - w->layer(0).bq, 12);
  EXPECT_EQ(config.NumParameters(), 80 + 2 * 8 + 2 * 96 + 2 * 48 + 3 * 128 + 8 + 12 + 12);
  EXPECT_THAT(config.ToString(), HasSubstr("head_dim=6"));
  config.explicit_head_dim = 0;
  EXPECT_THAT(config.ToString(), Not(HasSubstr("head_dim")));
}

TEST(Llama2cCheckpointTest, BadExplicitHeadDimsNameTheField) {
  const ModelConfig good{.dim = 8,
                         .hidden_dim = 16,
                         .n_layers = 1,
                         .n_heads = 2,
                         .n_kv_heads = 1,
                         .vocab_size = 10,
                         .seq_len = 4};
  const std::pair<int32_t, const char*> cases[] = {
      {-2, "explicit_head_dim must be >= 0"},
      {5, "head_dim = 5 must be even"},
      {1 << 30, "n_heads * head_dim = 2 * 1073741824 passes the supported 2^31"},
      {1 << 29, "more than the supported 2^31"},  // wq [2^30, 8] elements
  };
  for (const auto& [head_dim, want] : cases) {
    ModelConfig c = good;
    c.explicit_head_dim = head_dim;
    EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument) << head_dim;
    EXPECT_THAT(c.Validate().message(), HasSubstr(want)) << head_dim;
  }
  ModelConfig odd = good;  // 3 heads do not divide 8, but an explicit width makes that fine
  odd.n_heads = 3;
  odd.n_kv_heads = 3;
  EXPECT_THAT(odd.Validate().message(), HasSubstr("or set explicit_head_dim"));
  odd.explicit_head_dim = 4;
  EXPECT_TRUE(odd.Validate().ok()) << odd.Validate();
}

TEST(Llama2cCheckpointTest, RandomWeightsAreDeterministic) {
  ModelConfig config{.dim = 16,
                     .hidden_dim = 24,
                     .n_layers = 2,
                     .n_heads = 2,
                     .n_kv_heads = 1,
                     .vocab_size = 20,
                     .seq_len = 8};
  absl::StatusOr<ModelWeights> a = ModelWeights::Random(config, {.seed = 5});
  absl::StatusOr<ModelWeights> b = ModelWeights::Random(config, {.seed = 5});
  absl::StatusOr<ModelWeights> c = ModelWeights::Random(config, {.seed = 6});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->layer(1).w2[3], b->layer(1).w2[3]);
  EXPECT_NE(a->layer(1).w2[3], c->layer(1).w2[3]);
  config.n_kv_heads = 3;
  EXPECT_EQ(ModelWeights::Random(config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Llama2cCheckpointTest, LoadsAidreams260K) {
  auto dir = pagedkv::testing::SharedDataDir();
  if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const auto path = *dir / "aidreams260K" / "aidreams260K.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->config().dim, 64);
  EXPECT_EQ(w->config().hidden_dim, 172);
  EXPECT_EQ(w->config().n_layers, 4);
  EXPECT_EQ(w->config().n_heads, 4);
  EXPECT_EQ(w->config().vocab_size, 512);
  EXPECT_EQ(w->config().seq_len, 128);
  EXPECT_TRUE(w->config().shared_classifier);
}

}  // namespace
}  // namespace pagedkv

namespace pagedkv {
namespace {

// Found by fuzzing: every tensor of this header is below the 2^31-element cap, but the per-layer
// sizes times n_layers overflowed int64, so a 92 KB file passed the size check and the load then
// aborted allocating. The header is refused as impossible.
TEST(Llama2cCheckpointHostileTest, LayerCountThatOverflowsThePayloadIsRefused) {
  const int32_t header[7] = {/*dim=*/32768,   /*hidden_dim=*/32768, /*n_layers=*/1 << 30,
                             /*n_heads=*/256, /*n_kv_heads=*/256,   /*vocab_size=*/64,
                             /*seq_len=*/64};
  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));
  bytes.resize(92 * 1024, '\0');
  absl::StatusOr<ModelWeights> weights = ModelWeights::ParseLlama2c(bytes, "crafted.bin");
  ASSERT_FALSE(weights.ok());
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(weights.status().message()),
              ::testing::HasSubstr("pass the supported 2^40 weights"));
}

}  // namespace
}  // namespace pagedkv
