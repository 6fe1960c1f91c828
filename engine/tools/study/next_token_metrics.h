// Copyright 2026 The pagedkv Authors.
//
// Next-token metrics that compare an approximate forward pass (e.g. shifted reuse) with the exact
// one (full recompute) on the same rows of logits: KL divergence KL(exact || approx) of the
// softmax distributions, top-1 agreement, and the negative log-likelihood of given targets (for
// perplexity). Computed in float64 with max-subtracted log-softmax.
//
// Example:
//   pagedkv::NextTokenMetrics m;
//   PAGEDKV_RETURN_IF_ERROR(m.Add(exact_logits, approx_logits, vocab, targets));
//   double kl = m.MeanKl(), agree = m.Top1Agreement(), ppl = m.ApproxPerplexity();
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_NEXT_TOKEN_METRICS_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_NEXT_TOKEN_METRICS_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// Accumulates over any number of Add calls (e.g. several documents).
class PAGEDKV_EXPORT NextTokenMetrics {
 public:
  // `exact` and `approx`: [rows, vocab] logits. `targets`: the true next token of the first
  // targets.size() rows (<= rows; -1 skips a row), used for the perplexities. InvalidArgument
  // (nothing added) for mismatched sizes, vocab < 1, or a target outside [0, vocab).
  absl::Status Add(std::span<const float> exact, std::span<const float> approx, int64_t vocab,
                   std::span<const TokenId> targets);

  int64_t rows() const { return rows_; }
  // Mean over rows of KL(exact || approx) in nats; 0 when no rows.
  double MeanKl() const { return rows_ == 0 ? 0.0 : kl_sum_ / static_cast<double>(rows_); }
  // Fraction of rows whose argmax agrees (lowest index on ties); 0 when no rows.
  double Top1Agreement() const {
    return rows_ == 0 ? 0.0 : static_cast<double>(top1_same_) / static_cast<double>(rows_);
  }
  // exp(mean NLL of the targets) under each distribution; 0 when no targets.
  double ExactPerplexity() const;
  double ApproxPerplexity() const;

 private:
  int64_t rows_ = 0;
  int64_t top1_same_ = 0;
  int64_t targets_ = 0;
  double kl_sum_ = 0.0;
  double exact_nll_ = 0.0;
  double approx_nll_ = 0.0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_NEXT_TOKEN_METRICS_H_
