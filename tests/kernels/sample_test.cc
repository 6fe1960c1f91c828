// Copyright 2026 The pagedkv Authors.
//
// Sampling: greedy, temperature (frequencies vs the softmax), top-p nucleus, seeding, bad input;
// the quickselect top-p threshold against the full-sort implementation it replaced.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/sample_math.h"
#include "pagedkv/kernels/cpu_ops.h"

namespace pagedkv {
namespace {

std::vector<int32_t> Draw(const std::vector<float>& logits, SamplingParams params, int n) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < n; ++i) {
    params.counter = static_cast<uint64_t>(i);
    int32_t token = -1;
    EXPECT_TRUE(cpu::Sample({.logits = logits.data(),
                             .params = &params,
                             .out_tokens = &token,
                             .num_seqs = 1,
                             .vocab_size = static_cast<int64_t>(logits.size())})
                    .ok());
    tokens.push_back(token);
  }
  return tokens;
}

TEST(SampleTest, GreedyPicksLowestIndexOfTheMaximumPerRow) {
  const std::vector<float> logits = {0.1f,  3.0f,  3.0f,  -1.0f,  // row 0: tie -> 1
                                     -5.0f, -4.0f, -6.0f, -4.5f};
  const std::vector<SamplingParams> params(2);
  std::vector<int32_t> out(2, -1);
  ASSERT_TRUE(cpu::Sample({.logits = logits.data(),
                           .params = params.data(),
                           .out_tokens = out.data(),
                           .num_seqs = 2,
                           .vocab_size = 4})
                  .ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1}));
}

// A temperature too small to divide by (1 / 1e-39 overflows to inf, and 0 * inf is NaN) samples
// greedily, as every temperature below kMinSamplingTemperature does; before, it drew from NaN
// probabilities and returned one token over and over.
TEST(SampleTest, TinyTemperatureIsGreedy) {
  const std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f};
  for (float temperature : {1e-39f, 1e-30f, 9e-6f, -1.0f}) {
    for (uint64_t counter = 0; counter < 20; ++counter) {
      const SamplingParams params{.temperature = temperature, .seed = 5, .counter = counter};
      int32_t out = -1;
      ASSERT_TRUE(cpu::Sample({.logits = logits.data(),
                               .params = &params,
                               .out_tokens = &out,
                               .num_seqs = 1,
                               .vocab_size = 4})
                      .ok());
      EXPECT_EQ(out, 1) << "temperature " << temperature;
    }
  }
  EXPECT_FALSE(IsGreedyTemperature(kMinSamplingTemperature));
}

TEST(SampleTest, TemperatureFrequenciesFollowTheSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  const float temperature = 0.8f;
  const int n = 40000;
  const auto tokens = Draw(logits, {.temperature = temperature, .seed = 99}, n);
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += (p[i] = std::exp(logits[i] / temperature));
  std::vector<int> counts(logits.size(), 0);
  for (int32_t t : tokens) ++counts.at(t);
  for (size_t i = 0; i < p.size(); ++i) {
    const double expected = n * p[i] / z;
    const double sigma = std::sqrt(n * (p[i] / z) * (1 - p[i] / z));
    EXPECT_NEAR(counts[i], expected, 5 * sigma) << "token " << i;
  }
}

TEST(SampleTest, TopPKeepsOnlyTheNucleus) {
  // Probabilities 0.5, 0.3, 0.1, 0.1 (temperature 1).
  const std::vector<float> logits = {std::log(0.1f), std::log(0.5f), std::log(0.1f),
                                     std::log(0.3f)};
  const int n = 20000;
  const auto tokens = Draw(logits, {.temperature = 1.0f, .top_p = 0.7f, .seed = 5}, n);
  int ones = 0;
  for (int32_t t : tokens) {
    ASSERT_TRUE(t == 1 || t == 3) << t;
    ones += t == 1;
  }
  const double sigma = std::sqrt(n * 0.625 * 0.375);
  EXPECT_NEAR(ones, n * 0.625, 5 * sigma);
  // A tiny top_p keeps only the most likely token.
  for (int32_t t : Draw(logits, {.temperature = 1.0f, .top_p = 0.01f, .seed = 5}, 100)) {
    EXPECT_EQ(t, 1);
  }
}

TEST(SampleTest, SeedAndCounterDetermineTheDraw) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * i);
  const SamplingParams a{.temperature = 1.0f, .top_p = 0.9f, .seed = 1};
  const SamplingParams b{.temperature = 1.0f, .top_p = 0.9f, .seed = 2};
  EXPECT_EQ(Draw(logits, a, 50), Draw(logits, a, 50));
  EXPECT_NE(Draw(logits, a, 50), Draw(logits, b, 50));
  // A batch gives each row its own stream: same result as one row at a time.
  const std::vector<float> two_rows = [&] {
    std::vector<float> r = logits;
    r.insert(r.end(), logits.begin(), logits.end());
    return r;
  }();
  std::vector<SamplingParams> params = {a, b};
  params[0].counter = 3;
  params[1].counter = 3;
  std::vector<int32_t> out(2);
  ASSERT_TRUE(cpu::Sample({.logits = two_rows.data(),
                           .params = params.data(),
                           .out_tokens = out.data(),
                           .num_seqs = 2,
                           .vocab_size = 1000})
                  .ok());
  EXPECT_EQ(out[0], Draw(logits, a, 4)[3]);
  EXPECT_EQ(out[1], Draw(logits, b, 4)[3]);
}

// The previous CPU implementation, written plainly: probabilities, a full descending sort, the
// threshold where the running sum first reaches top_p * total (else the smallest probability),
// then the draw over kept tokens in index order.
int32_t FullSortSample(const float* logits, int64_t vocab, const SamplingParams& params) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  const float inv_t = 1.0f / params.temperature;
  std::vector<float> probs(vocab);
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    probs[i] = std::exp((logits[i] - max_logit) * inv_t);
    total += probs[i];
  }
  float threshold = 0.0f;
  if (params.top_p < 1.0f) {
    std::vector<float> sorted = probs;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const double target = static_cast<double>(params.top_p) * total;
    double cumulative = 0.0;
    for (float p : sorted) {
      cumulative += p;
      threshold = p;
      if (cumulative >= target) break;
    }
  }
  double kept = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (probs[i] >= threshold) kept += probs[i];
  }
  const double u = SampleUniform(params.seed, params.counter) * kept;
  double cumulative = 0.0;
  int64_t last_kept = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (probs[i] < threshold) continue;
    cumulative += probs[i];
    last_kept = i;
    if (cumulative > u) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last_kept);
}

TEST(SampleTest, TopPMatchesTheFullSortImplementation) {
  const int64_t vocab = 3000;
  std::mt19937 rng(21);
  int rows = 0;
  // Flat, peaked and heavily tied (logits rounded to a few levels) distributions.
  for (int shape = 0; shape < 3; ++shape) {
    for (int r = 0; r < 12; ++r) {
      std::vector<float> logits(vocab);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (float& x : logits) {
        x = dist(rng);
        if (shape == 1) x *= 40.0f;
        if (shape == 2) x = std::round(x * 3.0f);
      }
      for (float top_p : {0.01f, 0.3f, 0.5f, 0.9f, 0.999f}) {
        for (float temperature : {0.5f, 1.0f, 2.0f}) {
          const SamplingParams params{.temperature = temperature,
                                      .top_p = top_p,
                                      .seed = static_cast<uint64_t>(r),
                                      .counter = static_cast<uint64_t>(shape)};
          int32_t token = -1;
          ASSERT_TRUE(cpu::Sample({.logits = logits.data(),
                                   .params = &params,
                                   .out_tokens = &token,
                                   .num_seqs = 1,
                                   .vocab_size = vocab})
                          .ok());
          ASSERT_EQ(token, FullSortSample(logits.data(), vocab, params))
              << "shape " << shape << " row " << r << " top_p " << top_p << " temperature "
              << temperature;
          ++rows;
        }
      }
    }
  }
  EXPECT_EQ(rows, 3 * 12 * 5 * 3);
}

TEST(SampleTest, BadParamsAreInvalidArgument) {
  const std::vector<float> logits = {0.0f, 1.0f};
  int32_t token = -9;
  for (SamplingParams p :
       {SamplingParams{.temperature = 1.0f, .top_p = 0.0f},
        SamplingParams{.temperature = 1.0f, .top_p = 1.5f}, SamplingParams{.temperature = NAN}}) {
    EXPECT_EQ(cpu::Sample({.logits = logits.data(),
                           .params = &p,
                           .out_tokens = &token,
                           .num_seqs = 1,
                           .vocab_size = 2})
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
  SamplingParams ok;
  EXPECT_EQ(cpu::Sample({.logits = logits.data(),
                         .params = &ok,
                         .out_tokens = &token,
                         .num_seqs = 1,
                         .vocab_size = 0})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(token, -9);
}

}  // namespace
}  // namespace pagedkv
