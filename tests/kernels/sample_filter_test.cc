// Copyright 2026 The pagedkv Authors.
//
// vLLM's top_k and min_p in the CPU sample op (issue 42): every draw against a brute-force float64
// reference written from vLLM v1's definitions (vllm/v1/sample/logits_processor/builtin.py
// MinPLogitsProcessor, vllm/v1/sample/ops/topk_topp_sampler.py): softmax(logits / T); min_p drops
// p < min_p * max p; top_k keeps logits >= the k-th largest (ties kept); top_p over what is left
// (renormalised) keeps the tokens at or above the probability where the descending cumulative mass
// first reaches top_p; the draw walks kept tokens in index order with the counter-based uniform.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sample_math.h"
#include "pagedkv/kernels/cpu_ops.h"

namespace pagedkv {
namespace {

int32_t SampleOne(const std::vector<float>& logits, const SamplingParams& params) {
  int32_t token = -1;
  EXPECT_TRUE(cpu::Sample({.logits = logits.data(),
                           .params = &params,
                           .out_tokens = &token,
                           .num_seqs = 1,
                           .vocab_size = static_cast<int64_t>(logits.size())})
                  .ok());
  return token;
}

// The float64 reference: kept[i] and p[i] (relative to the largest), and the draw for uniform u;
// `ambiguous` is set when u falls within 1e-6 of a cumulative boundary (float rounding may then
// decide either way).
struct Reference {
  std::vector<bool> kept;
  std::vector<double> p;
  int32_t Draw(double u, bool* ambiguous) const {
    double mass = 0.0;
    for (size_t i = 0; i < p.size(); ++i) mass += kept[i] ? p[i] : 0.0;
    const double target = u * mass;
    double cumulative = 0.0;
    int32_t last = -1;
    for (size_t i = 0; i < p.size(); ++i) {
      if (!kept[i]) continue;
      cumulative += p[i];
      last = static_cast<int32_t>(i);
      if (std::abs(cumulative - target) < 1e-6 * mass) *ambiguous = true;
      if (cumulative > target) return last;
    }
    return last;
  }
};

Reference MakeReference(const std::vector<float>& logits, const SamplingParams& s) {
  const size_t n = logits.size();
  const double max = *std::max_element(logits.begin(), logits.end());
  Reference r{.kept = std::vector<bool>(n, true), .p = std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) r.p[i] = std::exp((logits[i] - max) / s.temperature);
  if (s.top_k >= 1 && s.top_k < static_cast<int32_t>(n)) {
    std::vector<double> sorted(logits.begin(), logits.end());
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(s.top_k - 1)];
    for (size_t i = 0; i < n; ++i) r.kept[i] = r.kept[i] && logits[i] >= kth;
  }
  for (size_t i = 0; i < n; ++i) r.kept[i] = r.kept[i] && r.p[i] >= s.min_p;
  if (s.top_p < 1.0f) {
    std::vector<double> kept_p;
    for (size_t i = 0; i < n; ++i) {
      if (r.kept[i]) kept_p.push_back(r.p[i]);
    }
    std::sort(kept_p.begin(), kept_p.end(), std::greater<double>());
    const double total = std::accumulate(kept_p.begin(), kept_p.end(), 0.0);
    double cumulative = 0.0;
    double threshold = kept_p.back();
    for (double p : kept_p) {
      cumulative += p;
      if (cumulative >= s.top_p * total) {
        threshold = p;
        break;
      }
    }
    for (size_t i = 0; i < n; ++i) r.kept[i] = r.kept[i] && r.p[i] >= threshold;
  }
  return r;
}

// Logits on a grid (k * 0.37, shuffled) so no probability sits at a min_p or top_k boundary.
std::vector<float> GridLogits(size_t n, uint32_t seed) {
  std::vector<float> logits(n);
  for (size_t i = 0; i < n; ++i) logits[i] = 0.37f * static_cast<float>(i) - 20.0f;
  std::shuffle(logits.begin(), logits.end(), std::mt19937(seed));
  return logits;
}

TEST(SampleFilterTest, EveryDrawMatchesTheFloat64Reference) {
  const std::vector<float> logits = GridLogits(300, 3);
  const std::vector<SamplingParams> cases = {
      {.temperature = 1.0f, .top_k = 1},
      {.temperature = 1.0f, .top_k = 7},
      {.temperature = 3.0f, .top_k = 40},
      {.temperature = 1.0f, .top_k = 299},
      {.temperature = 1.0f, .min_p = 0.05f},
      {.temperature = 4.0f, .min_p = 0.3f},
      {.temperature = 1.0f, .min_p = 1.0f},
      {.temperature = 5.0f, .top_p = 0.8f, .top_k = 30},
      {.temperature = 6.0f, .top_p = 0.6f, .min_p = 0.2f},
      {.temperature = 8.0f, .top_p = 0.9f, .top_k = 25, .min_p = 0.1f}};
  int compared = 0;
  for (const SamplingParams& base : cases) {
    const Reference ref = MakeReference(logits, base);
    std::set<int32_t> seen;
    for (uint64_t counter = 0; counter < 400; ++counter) {
      SamplingParams s = base;
      s.seed = 77;
      s.counter = counter;
      bool ambiguous = false;
      const int32_t want = ref.Draw(SampleUniform(s.seed, s.counter), &ambiguous);
      const int32_t got = SampleOne(logits, s);
      ASSERT_TRUE(ref.kept[static_cast<size_t>(got)])
          << "top_k " << s.top_k << " min_p " << s.min_p << " drew dropped token " << got;
      if (ambiguous) continue;
      EXPECT_EQ(got, want) << "top_k " << s.top_k << " min_p " << s.min_p << " counter " << counter;
      seen.insert(got);
      ++compared;
    }
    const auto num_kept = std::count(ref.kept.begin(), ref.kept.end(), true);
    if (num_kept <= 10) {
      EXPECT_EQ(static_cast<int64_t>(seen.size()), num_kept);
    }
  }
  EXPECT_GT(compared, 3900);
}

// vLLM keeps every token tied with the k-th largest logit.
TEST(SampleFilterTest, TopKKeepsTiesWithTheKthLogit) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f};
  std::set<int32_t> seen;
  for (uint64_t counter = 0; counter < 300; ++counter) {
    seen.insert(
        SampleOne(logits, {.temperature = 1.0f, .seed = 1, .counter = counter, .top_k = 2}));
  }
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 4}));
}

// Off values (top_k 0 or >= vocabulary, min_p 0) draw exactly what no filter draws, and greedy rows
// ignore both (vLLM resets them for greedy requests).
TEST(SampleFilterTest, OffValuesAndGreedyRowsAreUnchanged) {
  const std::vector<float> logits = GridLogits(500, 9);
  for (uint64_t counter = 0; counter < 200; ++counter) {
    const SamplingParams plain{.temperature = 1.3f, .top_p = 0.9f, .seed = 5, .counter = counter};
    const int32_t want = SampleOne(logits, plain);
    for (int32_t top_k : {0, 500, 100000}) {
      SamplingParams s = plain;
      s.top_k = top_k;
      EXPECT_EQ(SampleOne(logits, s), want) << top_k;
    }
  }
  const int32_t argmax =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(SampleOne(logits, {.temperature = 0.0f, .top_k = 3, .min_p = 0.9f}), argmax);
}

TEST(SampleFilterTest, OutOfRangeTopKOrMinPIsInvalidArgument) {
  const std::vector<float> logits = {0.0f, 1.0f};
  for (const SamplingParams& bad : {SamplingParams{.temperature = 1.0f, .top_k = -1},
                                    SamplingParams{.temperature = 1.0f, .min_p = 1.5f},
                                    SamplingParams{.temperature = 1.0f, .min_p = -0.1f},
                                    SamplingParams{.temperature = 1.0f, .min_p = NAN}}) {
    int32_t token = -1;
    const absl::Status status = cpu::Sample({.logits = logits.data(),
                                             .params = &bad,
                                             .out_tokens = &token,
                                             .num_seqs = 1,
                                             .vocab_size = 2});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(token, -1);
  }
}

}  // namespace
}  // namespace pagedkv
