// Copyright 2026 The pagedkv Authors.
//
// ApplyLogitEdits against values computed by hand from vLLM v1's definitions: min_tokens' -inf,
// logit_bias added, the repetition penalty's sign rule (positive logits divided, zero and negative
// multiplied), then frequency x count and presence subtracted; untouched tokens unchanged.
#include "engine/model/runner/logit_edits.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

TEST(LogitEditsTest, AppliesVllmsOrderAndSignRule) {
  std::vector<float> row = {2.0f, -2.0f, 0.0f, 3.0f, 1.0f, -1.0f, 5.0f, 4.0f};
  const RowLogitEdits edits{
      .row = 0,
      .edits = {{.token = 0, .repeated = true},                     // prompt only: 2 / 2
                {.token = 1, .repeated = true},                     // prompt only: -2 x 2
                {.token = 2, .repeated = true},                     // 0 is not positive: 0 x 2
                {.token = 3, .repeated = true, .output_count = 3},  // 3 / 2 - 0.5 x 3 - 0.25
                {.token = 4, .bias = -3.0f, .repeated = true},      // (1 - 3) x 2
                {.token = 5, .banned = true, .bias = 100.0f},       // -inf stays
                {.token = 6, .bias = 1.5f}},                        // 5 + 1.5
      .repetition_penalty = 2.0f,
      .frequency_penalty = 0.5f,
      .presence_penalty = 0.25f};
  ApplyLogitEdits(edits, absl::MakeSpan(row));
  EXPECT_FLOAT_EQ(row[0], 1.0f);
  EXPECT_FLOAT_EQ(row[1], -4.0f);
  EXPECT_FLOAT_EQ(row[2], 0.0f);
  EXPECT_FLOAT_EQ(row[3], 1.5f - 1.5f - 0.25f);
  EXPECT_FLOAT_EQ(row[4], -4.0f);
  EXPECT_TRUE(std::isinf(row[5]) && row[5] < 0.0f);
  EXPECT_FLOAT_EQ(row[6], 6.5f);
  EXPECT_FLOAT_EQ(row[7], 4.0f);  // no edit
}

// Frequency and presence touch output tokens only, in float, one subtraction each (vLLM's
// `logits -= f * counts; logits -= p * mask`); a repetition penalty below 1 raises repeats.
TEST(LogitEditsTest, OutputPenaltiesAndAPenaltyBelowOne) {
  std::vector<float> row = {0.1f, 0.1f, -3.0f};
  const RowLogitEdits edits{
      .edits = {{.token = 0, .output_count = 7}, {.token = 2, .repeated = true, .output_count = 1}},
      .repetition_penalty = 0.5f,
      .frequency_penalty = -0.3f,
      .presence_penalty = 1.1f};
  ApplyLogitEdits(edits, absl::MakeSpan(row));
  EXPECT_EQ(row[0], (0.1f - (-0.3f * 7.0f)) - 1.1f);
  EXPECT_EQ(row[1], 0.1f);
  EXPECT_EQ(row[2], (-3.0f * 0.5f - (-0.3f * 1.0f)) - 1.1f);
}

}  // namespace
}  // namespace pagedkv
