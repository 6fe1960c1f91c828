// Copyright 2026 The pagedkv Authors.
//
// CPU sampling: greedy argmax, or softmax(logits / temperature) restricted to the top-p nucleus
// and drawn with the counter-based uniform of kernels/sample_math.h. The nucleus is every token
// whose probability is >= the probability at which the descending cumulative mass first reaches
// top_p; the draw walks kept tokens in index order (the CUDA backend does the same).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"
#include "kernels/op_validate.h"
#include "kernels/sample_math.h"
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

int32_t SampleRow(const float* logits, int64_t vocab, const SamplingParams& params,
                  std::vector<float>& probs, std::vector<float>& sorted) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  const float inv_t = 1.0f / params.temperature;
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    probs[i] = std::exp((logits[i] - max_logit) * inv_t);
    total += probs[i];
  }
  float threshold = 0.0f;
  if (params.top_p < 1.0f) {
    // Sort only as many of the largest probabilities as the nucleus needs: the top 64, then
    // 1024, then all (same threshold as one full sort; peaked distributions stop early).
    sorted.assign(probs.begin(), probs.begin() + vocab);
    const double target = static_cast<double>(params.top_p) * total;
    int64_t done = 0;
    double cumulative = 0.0;
    bool reached = false;
    for (int64_t want : {int64_t{64}, int64_t{1024}, vocab}) {
      want = std::min(want, vocab);
      if (want <= done) continue;
      if (want == vocab) {
        std::sort(sorted.begin() + done, sorted.end(), std::greater<float>());
      } else {
        std::nth_element(sorted.begin() + done, sorted.begin() + want, sorted.end(),
                         std::greater<float>());
        std::sort(sorted.begin() + done, sorted.begin() + want, std::greater<float>());
      }
      for (; done < want && !reached; ++done) {
        cumulative += sorted[done];
        threshold = sorted[done];
        reached = cumulative >= target;
      }
      if (reached) break;
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

}  // namespace

absl::Status Sample(const SampleArgs& args) {
  PAGEDKV_RETURN_IF_ERROR(ValidateSample(args));
  for (int64_t s = 0; s < args.num_seqs; ++s) {
    const SamplingParams& p = args.params[s];
    if (!std::isfinite(p.temperature) || !(p.top_p > 0.0f && p.top_p <= 1.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sample: params[", s, "] needs a finite temperature and top_p in (0, 1]"));
    }
  }
  std::vector<float> probs(args.vocab_size);
  std::vector<float> sorted;
  for (int64_t s = 0; s < args.num_seqs; ++s) {
    const float* row = args.logits + s * args.vocab_size;
    const SamplingParams& p = args.params[s];
    args.out_tokens[s] = p.temperature <= 0.0f ? Argmax(row, args.vocab_size)
                                               : SampleRow(row, args.vocab_size, p, probs, sorted);
  }
  return absl::OkStatus();
}

}  // namespace pagedkv::cpu
