// Copyright 2026 The pagedkv Authors.
//
// TokenLogprobsOf (see token_logprobs.h).
#include "engine/runtime/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/simd/simd_kernels.h"

namespace pagedkv {
namespace {

// log(sum exp(row)) around the maximum (the exps in fp32 vectors, summed in float64:
// simd_kernels.h); NaN when a logit is NaN or +inf.
double LogSumExp(absl::Span<const float> row) {
  float max = -std::numeric_limits<float>::infinity();
  for (const float x : row) {
    if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
    max = std::max(max, x);
  }
  if (!std::isfinite(max)) return std::numeric_limits<double>::quiet_NaN();
  const double sum = cpu::simd::SumExpShifted(row.data(), static_cast<int64_t>(row.size()), max);
  return max + std::log(sum);
}

// More probable first; ties by the lower id (the argmax's rule).
bool Before(const TokenLogprob& a, const TokenLogprob& b) {
  return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
}

// The k largest logits of `row`, in Before order (a bounded insertion: k <= 20 in practice).
std::vector<TokenLogprob> TopLogits(absl::Span<const float> row, size_t k) {
  std::vector<TokenLogprob> top;
  top.reserve(k + 1);
  for (size_t i = 0; i < row.size() && k > 0; ++i) {
    const TokenLogprob entry{.token = static_cast<TokenId>(i), .logprob = row[i]};
    if (top.size() == k && !Before(entry, top.back())) continue;
    top.insert(std::upper_bound(top.begin(), top.end(), entry, Before), entry);
    if (top.size() > k) top.pop_back();
  }
  return top;
}

}  // namespace

TokenLogprobs TokenLogprobsOf(absl::Span<const float> row, TokenId token, int32_t top_k) {
  const double log_z = LogSumExp(row);
  auto logprob = [log_z](float logit) { return static_cast<float>(logit - log_z); };
  TokenLogprobs out;
  const float logit = row[static_cast<size_t>(token)];
  out.logprob = logprob(logit);
  out.rank = 1 + static_cast<int32_t>(
                     std::count_if(row.begin(), row.end(), [logit](float x) { return x > logit; }));
  out.top = TopLogits(row, static_cast<size_t>(std::max(top_k, 0)));
  for (TokenLogprob& entry : out.top) entry.logprob = logprob(entry.logprob);
  return out;
}

}  // namespace pagedkv
