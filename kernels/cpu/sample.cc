// Copyright 2026 The pagedkv Authors.
//
// CPU sampling: greedy argmax, or softmax(logits / temperature) restricted as vLLM's v1 sampler
// restricts it (min_p, then top_k, then top_p over what they keep) and drawn with the
// counter-based uniform of kernels/sample_math.h. min_p drops tokens whose probability is below
// min_p times the largest; top_k keeps the tokens whose logit is >= the k-th largest (ties kept);
// the nucleus is every remaining token whose probability is >= the probability at which the
// descending cumulative mass of the remaining tokens first reaches top_p; the draw walks kept
// tokens in index order (the CUDA backend does the same). Dropped tokens carry probability -1,
// which no threshold keeps. The k-th logit (nth_element) and the nucleus threshold (a weighted
// quickselect) are found without sorting: O(V) expected per row.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <new>
#include <vector>

#include "absl/status/status.h"
#include "kernels/content_checks.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/threaded_ops.h"
#include "kernels/op_validate.h"
#include "kernels/sample_math.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cpu {
namespace {

int32_t Argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// Sum of values[begin, end) in double.
double Mass(const float* begin, const float* end) {
  double sum = 0.0;
  for (const float* p = begin; p < end; ++p) sum += *p;
  return sum;
}

// The probability at which the descending cumulative mass of `probs` first reaches `target`, or
// the smallest probability when it never does (rounding): the threshold a full descending sort
// followed by a running sum gives. Weighted quickselect: pick a pivot, split the candidates into
// (> pivot, == pivot, < pivot); the threshold lies in the greater part when its mass already
// reaches what is still needed, is the pivot when the equal part completes it, and lies in the
// smaller part otherwise (with the greater and equal mass taken off what is needed). Each round
// keeps one part, so the expected cost is O(V). Pivots come from a fixed hash sequence, so the
// result is deterministic. Dropped (-1) and NaN probabilities are never candidates.
float NucleusThreshold(const std::vector<float>& probs, int64_t vocab, double target,
                       std::vector<float>& work) {
  work.clear();
  for (int64_t i = 0; i < vocab; ++i) {
    if (probs[i] >= 0.0f) work.push_back(probs[i]);  // not dropped, not NaN
  }
  if (work.empty()) return 0.0f;
  float* lo = work.data();
  float* hi = work.data() + work.size();
  double need = target;
  uint64_t round = 0;
  constexpr int64_t kSortBelow = 32;
  while (hi - lo > kSortBelow) {
    const float pivot = lo[SplitMix64(round++) % static_cast<uint64_t>(hi - lo)];
    float* equal_begin = std::partition(lo, hi, [pivot](float x) { return x > pivot; });
    float* equal_end = std::partition(equal_begin, hi, [pivot](float x) { return x == pivot; });
    const double greater = Mass(lo, equal_begin);
    if (greater >= need) {
      hi = equal_begin;
      continue;
    }
    const double through_pivot = greater + Mass(equal_begin, equal_end);
    if (through_pivot >= need || equal_end == hi) return pivot;
    need -= through_pivot;
    lo = equal_end;
  }
  std::sort(lo, hi, std::greater<float>());
  double cumulative = 0.0;
  for (float* p = lo; p < hi; ++p) {
    cumulative += *p;
    if (cumulative >= need) return *p;
  }
  return hi[-1];
}

// The k-th largest of the row's logits. REQUIRES: 1 <= k <= vocab.
float KthLargestLogit(const float* logits, int64_t vocab, int32_t k, std::vector<float>& work) {
  work.assign(logits, logits + vocab);
  const auto kth = work.begin() + (k - 1);
  std::nth_element(work.begin(), kth, work.end(), std::greater<float>());
  return *kth;
}

// Sets probs[i] to -1 (dropped) for the tokens min_p and top_k drop (exp((l - max) / T) is the
// probability relative to the largest, so min_p compares it directly); returns the mass kept.
double DropByMinPAndTopK(const float* logits, int64_t vocab, const SamplingParams& params,
                         std::vector<float>& probs, std::vector<float>& work) {
  const float kth = TopKActive(params.top_k, vocab)
                        ? KthLargestLogit(logits, vocab, params.top_k, work)
                        : -std::numeric_limits<float>::infinity();
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (probs[i] < params.min_p || logits[i] < kth) {
      probs[i] = -1.0f;
    } else {
      total += probs[i];
    }
  }
  return total;
}

int32_t SampleRow(const float* logits, int64_t vocab, const SamplingParams& params,
                  std::vector<float>& probs, std::vector<float>& work) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  const float inv_t = 1.0f / params.temperature;
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    probs[i] = std::exp((logits[i] - max_logit) * inv_t);
    total += probs[i];
  }
  if (params.min_p > 0.0f || TopKActive(params.top_k, vocab)) {
    total = DropByMinPAndTopK(logits, vocab, params, probs, work);
  }
  float threshold = 0.0f;
  if (params.top_p < 1.0f) {
    threshold = NucleusThreshold(probs, vocab, static_cast<double>(params.top_p) * total, work);
  }
  // Without top-p (threshold 0) every kept probability is >= 0 and every dropped one -1: the
  // sum below would add exactly total's terms in total's order.
  double kept = total;
  if (params.top_p < 1.0f) {
    kept = 0.0;
    for (int64_t i = 0; i < vocab; ++i) {
      if (probs[i] >= threshold) kept += probs[i];
    }
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

// Samples rows [begin, end) into tokens[begin, end) with this thread's scratch; false when the
// scratch cannot be allocated.
bool SampleRows(const SampleArgs& args, int64_t begin, int64_t end, int32_t* tokens) {
  thread_local std::vector<float> probs;
  thread_local std::vector<float> work;
  try {
    for (int64_t s = begin; s < end; ++s) {
      const float* row = args.logits + s * args.vocab_size;
      const SamplingParams& p = args.params[s];
      if (IsGreedyTemperature(p.temperature)) {
        tokens[s] = Argmax(row, args.vocab_size);
        continue;
      }
      probs.resize(static_cast<size_t>(args.vocab_size));
      tokens[s] = SampleRow(row, args.vocab_size, p, probs, work);
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

}  // namespace

absl::Status Sample(const SampleArgs& args) { return Sample(args, nullptr); }

absl::Status Sample(const SampleArgs& args, ThreadPool* pool) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSample(args));
  PAGEDKV_RETURN_IF_ERROR(CheckSampleContents(args));
  // Rows are independent (each draws from its own seed and counter): the same tokens for any
  // split. A sampled row costs a few passes over the vocabulary; greedy rows one.
  // Tokens land in out_tokens only when every row succeeded.
  std::vector<int32_t> tokens;
  try {
    tokens.resize(static_cast<size_t>(args.num_seqs));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("Sample: out of memory for its scratch");
  }
  std::atomic<bool> failed{false};
  ParallelFor(pool, args.num_seqs, MinItemsPerRange(4.0 * static_cast<double>(args.vocab_size)),
              [&](int64_t begin, int64_t end) {
                if (!SampleRows(args, begin, end, tokens.data())) failed = true;
              });
  if (failed) return absl::ResourceExhaustedError("Sample: out of memory for its scratch");
  std::copy(tokens.begin(), tokens.end(), args.out_tokens);
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
