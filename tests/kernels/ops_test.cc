// Copyright 2026 The pagedkv Authors.
//
// Linear, LM head, embedding gather, RMSNorm and SwiGLU against float64 references written here.
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

std::vector<double> ReferenceMatmul(const std::vector<float>& x, const std::vector<float>& w,
                                    int64_t m, int64_t n, int64_t k) {
  std::vector<double> y(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += double(x[i * k + t]) * w[j * k + t];
      y[i * n + j] = s;
    }
  }
  return y;
}

TEST(LinearTest, MatchesFloat64ForAwkwardShapes) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{1, 37, 13}, Shape{3, 5, 64}, Shape{7, 130, 257},
                  Shape{16, 64, 288}, Shape{2, 9000, 33}}) {
    const auto x = RandomFloats(s.m * s.k, 1);
    const auto w = RandomFloats(s.n * s.k, 2);
    std::vector<float> y(s.m * s.n, 123.0f);
    ASSERT_TRUE(
        cpu::Linear({.x = x.data(), .w = w.data(), .y = y.data(), .m = s.m, .n = s.n, .k = s.k})
            .ok());
    const auto ref = ReferenceMatmul(x, w, s.m, s.n, s.k);
    // fp32 sums of k products of magnitude <= 1: error <= k * 2^-23 (loose, deterministic bound).
    const double tol = s.k * 1.2e-7 + 1e-7;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], tol) << i;
    // accumulate adds onto y.
    std::vector<float> acc(s.m * s.n, 1.5f);
    ASSERT_TRUE(cpu::Linear({.x = x.data(),
                             .w = w.data(),
                             .y = acc.data(),
                             .m = s.m,
                             .n = s.n,
                             .k = s.k,
                             .accumulate = true})
                    .ok());
    for (size_t i = 0; i < acc.size(); ++i) ASSERT_NEAR(acc[i], ref[i] + 1.5, tol + 2e-7);
  }
}

TEST(LinearTest, ZeroRowsIsANoOpAndBadShapesAreInvalidArgument) {
  std::vector<float> x(4, 1.0f), w(4, 1.0f), y(4, 7.0f);
  EXPECT_TRUE(
      cpu::Linear({.x = x.data(), .w = w.data(), .y = y.data(), .m = 0, .n = 2, .k = 2}).ok());
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
  EXPECT_EQ(
      cpu::Linear({.x = x.data(), .w = w.data(), .y = y.data(), .m = 1, .n = 0, .k = 2}).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      cpu::Linear({.x = x.data(), .w = nullptr, .y = y.data(), .m = 1, .n = 1, .k = 2}).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      cpu::Linear({.x = x.data(), .w = w.data(), .y = x.data(), .m = 1, .n = 1, .k = 2}).code(),
      absl::StatusCode::kInvalidArgument);  // aliasing
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
}

TEST(LmHeadTest, SeparateAndTiedWeightsMatchReference) {
  const int64_t rows = 3, d = 48, vocab = 301;
  const auto hidden = RandomFloats(rows * d, 3);
  const auto lm_head = RandomFloats(vocab * d, 4);
  const auto embedding = RandomFloats(vocab * d, 5);
  for (const std::vector<float>* weight : {&lm_head, &embedding}) {
    std::vector<float> logits(rows * vocab);
    ASSERT_TRUE(cpu::LmHead({.hidden = hidden.data(),
                             .weight = weight->data(),
                             .logits = logits.data(),
                             .num_rows = rows,
                             .d_model = d,
                             .vocab_size = vocab})
                    .ok());
    const auto ref = ReferenceMatmul(hidden, *weight, rows, vocab, d);
    for (size_t i = 0; i < logits.size(); ++i) ASSERT_NEAR(logits[i], ref[i], 1e-5);
  }
  // Tied: gathering token t's embedding and projecting gives the largest logit at its own row
  // only when rows are well separated; check instead the exact identity logit[v] = <h, E[v]>.
  std::vector<float> logits(vocab);
  ASSERT_TRUE(cpu::LmHead({.hidden = embedding.data() + 5 * d,
                           .weight = embedding.data(),
                           .logits = logits.data(),
                           .num_rows = 1,
                           .d_model = d,
                           .vocab_size = vocab})
                  .ok());
  double self = 0;
  for (int64_t i = 0; i < d; ++i) self += double(embedding[5 * d + i]) * embedding[5 * d + i];
  EXPECT_NEAR(logits[5], self, 1e-5);
  EXPECT_EQ(cpu::LmHead({.hidden = hidden.data(),
                         .weight = lm_head.data(),
                         .logits = logits.data(),
                         .num_rows = 1,
                         .d_model = 0,
                         .vocab_size = vocab})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EmbeddingGatherTest, GathersRowsAndRejectsOutOfRangeIds) {
  const int64_t vocab = 50, dim = 19;
  const auto table = RandomFloats(vocab * dim, 6);
  const std::vector<int32_t> ids = {0, 49, 7, 7, 23};
  std::vector<float> out(ids.size() * dim);
  ASSERT_TRUE(cpu::EmbeddingGather({.table = table.data(),
                                    .token_ids = ids.data(),
                                    .out = out.data(),
                                    .num_tokens = 5,
                                    .vocab_size = vocab,
                                    .dim = dim})
                  .ok());
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t d = 0; d < dim; ++d) ASSERT_EQ(out[t * dim + d], table[ids[t] * dim + d]);
  }
  const std::vector<float> before = out;
  for (int32_t bad : {-1, 50}) {
    const std::vector<int32_t> bad_ids = {1, bad};
    EXPECT_EQ(cpu::EmbeddingGather({.table = table.data(),
                                    .token_ids = bad_ids.data(),
                                    .out = out.data(),
                                    .num_tokens = 2,
                                    .vocab_size = vocab,
                                    .dim = dim})
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(out, before);  // nothing written on failure
}

TEST(RmsNormTest, MatchesFloat64InPlaceAndOutOfPlace) {
  const int64_t rows = 4, dim = 291;
  const auto x = RandomFloats(rows * dim, 7, -3.0f, 3.0f);
  const auto weight = RandomFloats(dim, 8);
  std::vector<double> ref(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t d = 0; d < dim; ++d) ss += double(x[r * dim + d]) * x[r * dim + d];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t d = 0; d < dim; ++d) ref[r * dim + d] = x[r * dim + d] * inv * weight[d];
  }
  std::vector<float> out(rows * dim);
  ASSERT_TRUE(
      cpu::RmsNorm(
          {.x = x.data(), .weight = weight.data(), .out = out.data(), .num_rows = rows, .dim = dim})
          .ok());
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 1e-5 * (1 + std::abs(ref[i])));
  std::vector<float> inplace = x;
  ASSERT_TRUE(cpu::RmsNorm({.x = inplace.data(),
                            .weight = weight.data(),
                            .out = inplace.data(),
                            .num_rows = rows,
                            .dim = dim})
                  .ok());
  EXPECT_EQ(inplace, out);
  EXPECT_EQ(cpu::RmsNorm({.x = x.data(),
                          .weight = weight.data(),
                          .out = out.data(),
                          .num_rows = rows,
                          .dim = dim,
                          .eps = -1.0f})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SwiGluTest, MatchesFloat64WithStridedInputs) {
  const int64_t rows = 3, dim = 70;
  // gate and up interleaved in one [rows, 2 * dim] buffer, as a fused gate/up projection writes.
  const auto fused = RandomFloats(rows * 2 * dim, 9, -6.0f, 6.0f);
  std::vector<float> out(rows * dim);
  ASSERT_TRUE(cpu::SwiGlu({.gate = fused.data(),
                           .up = fused.data() + dim,
                           .out = out.data(),
                           .num_rows = rows,
                           .dim = dim,
                           .gate_stride = 2 * dim,
                           .up_stride = 2 * dim})
                  .ok());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 0; d < dim; ++d) {
      const double g = fused[r * 2 * dim + d];
      const double u = fused[r * 2 * dim + dim + d];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(out[r * dim + d], ref, 1e-5 * (1 + std::abs(ref)));
    }
  }
  EXPECT_EQ(cpu::SwiGlu({.gate = fused.data(),
                         .up = fused.data() + dim,
                         .out = out.data(),
                         .num_rows = rows,
                         .dim = dim,
                         .gate_stride = dim - 1})
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> alias = fused;
  EXPECT_EQ(cpu::SwiGlu({.gate = alias.data(),
                         .up = alias.data() + dim,
                         .out = alias.data(),
                         .num_rows = rows,
                         .dim = dim,
                         .gate_stride = 2 * dim,
                         .up_stride = 2 * dim})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
