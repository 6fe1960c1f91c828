// Copyright 2026 The pagedkv Authors.
#include "engine/tools/study/shift_study.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/tools/study/next_token_metrics.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {
namespace {

ShiftStudyOptions SmallStudy() {
  ShiftStudyOptions o;
  o.weights = std::make_shared<const ModelWeights>(
      ModelWeights::Random({.dim = 32,
                            .hidden_dim = 48,
                            .n_layers = 2,
                            .n_heads = 4,
                            .n_kv_heads = 2,
                            .vocab_size = 64,
                            .seq_len = 64},
                           {.seed = 9, .embedding_scale = 0.1f})
          .value());
  o.block_size = 4;
  o.chunk_length = 8;
  o.chunk_position = 5;
  o.shifts = {-3, 0, 4, 11};
  o.continuation_length = 6;
  o.drift_step = 3;
  o.drift_counts = {1, 4};
  o.num_documents = 2;
  o.recompute_first = 2;
  o.recompute_fraction = 0.25;
  return o;
}

TEST(ShiftStudyTest, SmallStudyPassesTheLayerZeroCheckAndFillsEveryReport) {
  const ShiftStudyOptions o = SmallStudy();
  absl::StatusOr<ShiftStudyReport> report = RunShiftStudy(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->AllLayerZeroChecksPass());
  const size_t cells = o.dtypes.size() * o.shifts.size();
  EXPECT_EQ(report->layer_zero_checks.size(), cells);
  EXPECT_EQ(report->key_errors.size(), cells * 2);
  EXPECT_EQ(report->quality.size(), cells * o.variants.size());
  EXPECT_EQ(report->rotations.size(), o.dtypes.size() * (2 * o.shifts.size() + 2 * 2));
  for (const KeyErrorRow& row : report->key_errors) {
    // No shift, layer 0: an exact copy.
    if (row.shift == 0 && row.layer == 0) {
      EXPECT_EQ(row.max_abs_error, 0.0);
    }
  }
  for (const QualityRow& row : report->quality) {
    EXPECT_EQ(row.rows, int64_t{o.num_documents} * o.continuation_length);
    const double n = o.chunk_position + row.shift + o.chunk_length + o.continuation_length;
    if (row.variant == "rerotated" || row.variant == "naive") {
      EXPECT_NEAR(row.compute_saved, o.chunk_length / n, 1e-12);
    }
    if (row.variant == "rerotated+firstk") {
      EXPECT_NEAR(row.compute_saved, (o.chunk_length - o.recompute_first) / n, 1e-12);
    }
    EXPECT_GE(row.mean_kl, 0.0);
    EXPECT_GT(row.perplexity, 0.0);
  }
}

// The float-keys variant: on f32 pages the kept float keys are the pages' keys, so it is the
// re-rotated variant bit for bit; on int8 pages it saves the same compute and is scored too.
TEST(ShiftStudyTest, FloatKeysVariantEqualsReRotationOnF32Pages) {
  ShiftStudyOptions o = SmallStudy();
  o.dtypes = {DType::kF32, DType::kInt8};
  o.variants = {ShiftVariant::kReRotated, ShiftVariant::kFloatKeys};
  absl::StatusOr<ShiftStudyReport> report = RunShiftStudy(o);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->quality.size(), o.dtypes.size() * o.shifts.size() * 2);
  // A floatkeys row beside each shift's compose and delta rows: on f32 pages, compose's error.
  ASSERT_EQ(report->rotations.size(), o.dtypes.size() * (3 * o.shifts.size() + 2 * 2));
  for (size_t i = 0; i + 2 < report->rotations.size(); ++i) {
    const RotationRow& row = report->rotations[i];
    if (row.form != "compose" || row.drift) continue;
    const RotationRow& float_keys = report->rotations[i + 2];
    ASSERT_EQ(float_keys.form, "floatkeys");
    if (row.dtype == DType::kF32) {
      EXPECT_EQ(float_keys.rel_rms_error, row.rel_rms_error);
    }
    if (row.dtype == DType::kInt8 && row.shift_per_step != 0) {
      EXPECT_LT(float_keys.rel_rms_error, 0.5 * row.rel_rms_error) << row.shift_per_step;
    }
  }
  for (size_t i = 0; i < report->quality.size(); i += 2) {
    const QualityRow& rerotated = report->quality[i];
    const QualityRow& float_keys = report->quality[i + 1];
    ASSERT_EQ(rerotated.variant, "rerotated");
    ASSERT_EQ(float_keys.variant, "rerotated+floatkeys");
    EXPECT_EQ(float_keys.compute_saved, rerotated.compute_saved);
    if (rerotated.dtype == DType::kF32) {
      EXPECT_EQ(float_keys.mean_kl, rerotated.mean_kl) << "shift " << rerotated.shift;
    }
    EXPECT_GE(float_keys.mean_kl, 0.0);
  }
}

TEST(ShiftStudyTest, BadOptionsAreRejected) {
  ShiftStudyOptions o = SmallStudy();
  o.shifts = {-6};  // p1 < 0
  EXPECT_EQ(RunShiftStudy(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallStudy();
  o.shifts = {60};  // past the context
  EXPECT_EQ(RunShiftStudy(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallStudy();
  o.recompute_fraction = 2.0;
  EXPECT_EQ(RunShiftStudy(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallStudy();
  o.weights = nullptr;
  EXPECT_EQ(RunShiftStudy(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SmallStudy();
  o.deviation_layer = 2;  // the model has layers 0 and 1
  absl::Status status = RunShiftStudy(o).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("layers 0 to 1"), std::string::npos) << status;
  o = SmallStudy();
  o.recompute_first = o.chunk_length + 1;
  status = RunShiftStudy(o).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("exceeds the chunk length"), std::string::npos) << status;
  EXPECT_EQ(ParseShiftVariant("bogus").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseShiftVariant("firstk").value(), ShiftVariant::kFirstK);
  EXPECT_EQ(ParseShiftVariant("floatkeys").value(), ShiftVariant::kFloatKeys);
  EXPECT_STREQ(ShiftVariantName(ShiftVariant::kFloatKeys), "rerotated+floatkeys");
}

TEST(NextTokenMetricsTest, MatchesAFloat64Reference) {
  const std::vector<float> p = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
  const std::vector<float> q = {1.5f, 1.0f, 0.5f, 2.0f, 0.0f, 1.0f};
  const std::vector<TokenId> targets = {1};
  NextTokenMetrics m;
  ASSERT_TRUE(m.Add(p, q, 3, targets).ok());
  double kl = 0.0, nll_p = 0.0, nll_q = 0.0;
  int agree = 0;
  for (int r = 0; r < 2; ++r) {
    double zp = 0.0, zq = 0.0;
    for (int i = 0; i < 3; ++i) {
      zp += std::exp(double{p[static_cast<size_t>(3 * r + i)]});
      zq += std::exp(double{q[static_cast<size_t>(3 * r + i)]});
    }
    int ap = 0, aq = 0;
    for (int i = 0; i < 3; ++i) {
      const double pi = std::exp(double{p[static_cast<size_t>(3 * r + i)]}) / zp;
      const double qi = std::exp(double{q[static_cast<size_t>(3 * r + i)]}) / zq;
      kl += pi * std::log(pi / qi) / 2.0;
      if (p[static_cast<size_t>(3 * r + i)] > p[static_cast<size_t>(3 * r + ap)]) ap = i;
      if (q[static_cast<size_t>(3 * r + i)] > q[static_cast<size_t>(3 * r + aq)]) aq = i;
      if (r == 0 && i == 1) {
        nll_p = -std::log(pi);
        nll_q = -std::log(qi);
      }
    }
    agree += ap == aq ? 1 : 0;
  }
  EXPECT_NEAR(m.MeanKl(), kl, 1e-12);
  EXPECT_DOUBLE_EQ(m.Top1Agreement(), agree / 2.0);
  EXPECT_NEAR(m.ExactPerplexity(), std::exp(nll_p), 1e-9);
  EXPECT_NEAR(m.ApproxPerplexity(), std::exp(nll_q), 1e-9);
  NextTokenMetrics same;
  ASSERT_TRUE(same.Add(p, p, 3, {}).ok());
  EXPECT_NEAR(same.MeanKl(), 0.0, 1e-15);
  EXPECT_EQ(same.Top1Agreement(), 1.0);
  EXPECT_EQ(same.Add(p, q, 4, {}).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<TokenId> bad_target = {7};
  EXPECT_EQ(same.Add(p, q, 3, bad_target).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(same.rows(), 2);
}

}  // namespace
}  // namespace pagedkv
