// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/next_token_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagedkv {
namespace {

// log-softmax of one row, float64.
void LogSoftmax(std::span<const float> row, std::vector<double>* out) {
  const double max = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float x : row) sum += std::exp(double{x} - max);
  const double log_sum = std::log(sum) + max;
  out->resize(row.size());
  for (size_t i = 0; i < row.size(); ++i) (*out)[i] = double{row[i]} - log_sum;
}

size_t ArgMax(std::span<const float> row) {
  return static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

absl::Status NextTokenMetrics::Add(std::span<const float> exact, std::span<const float> approx,
                                   int64_t vocab, std::span<const TokenId> targets) {
  if (vocab < 1 || exact.size() != approx.size() || exact.size() % static_cast<size_t>(vocab)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NextTokenMetrics::Add: exact (", exact.size(), ") and approx (", approx.size(),
        ") logits must have equal sizes, a multiple of vocab = ", vocab));
  }
  const size_t rows = exact.size() / static_cast<size_t>(vocab);
  if (targets.size() > rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("NextTokenMetrics::Add: ", targets.size(), " targets for ", rows, " rows"));
  }
  for (TokenId t : targets) {
    if (t < -1 || t >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("NextTokenMetrics::Add: target ", t,
                                                     " is outside [0, ", vocab, ") (or -1)"));
    }
  }
  std::vector<double> lp, lq;
  const auto v = static_cast<size_t>(vocab);
  for (size_t r = 0; r < rows; ++r) {
    const std::span<const float> p_row = exact.subspan(r * v, v);
    const std::span<const float> q_row = approx.subspan(r * v, v);
    LogSoftmax(p_row, &lp);
    LogSoftmax(q_row, &lq);
    double kl = 0.0;
    for (size_t i = 0; i < v; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    kl_sum_ += std::max(kl, 0.0);
    top1_same_ += ArgMax(p_row) == ArgMax(q_row) ? 1 : 0;
    if (r < targets.size() && targets[r] >= 0) {
      exact_nll_ -= lp[static_cast<size_t>(targets[r])];
      approx_nll_ -= lq[static_cast<size_t>(targets[r])];
      ++targets_;
    }
  }
  rows_ += static_cast<int64_t>(rows);
  return absl::OkStatus();
}

double NextTokenMetrics::ExactPerplexity() const {
  return targets_ == 0 ? 0.0 : std::exp(exact_nll_ / static_cast<double>(targets_));
}

double NextTokenMetrics::ApproxPerplexity() const {
  return targets_ == 0 ? 0.0 : std::exp(approx_nll_ / static_cast<double>(targets_));
}

}  // namespace pagedkv
