// Copyright 2026 The pagedkv Authors.
//
// ExpectGreedyMatchesReference: the greedy-ids check the engine tests run against an
// HfTestModel's float64 reference (tests/engine/model/hf_test_model.h).
//
// Example:
//   int checked = ExpectGreedyMatchesReference(model, prompt, result.output_tokens, "bs=4");
//   EXPECT_GT(checked, 0);
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_HF_REFERENCE_CHECK_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_HF_REFERENCE_CHECK_H_

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/types.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv::testing {

// Checks each generated token against the reference's argmax at the position before it (the
// reference runs on the prompt and the engine's own output), skipping near-ties. Returns the
// number of positions checked.
inline int ExpectGreedyMatchesReference(const HfTestModel& model,
                                        const std::vector<TokenId>& prompt,
                                        const std::vector<TokenId>& output,
                                        const std::string& trace) {
  std::vector<int> all(prompt.begin(), prompt.end());
  all.insert(all.end(), output.begin(), output.end());
  const std::vector<std::vector<double>> logits = model.Logits(all);
  int checked = 0;
  for (size_t i = 0; i < output.size(); ++i) {
    const std::vector<double>& row = logits[prompt.size() - 1 + i];
    double scale = 1.0;
    for (double v : row) scale = std::max(scale, std::abs(v));
    std::vector<double> sorted = row;
    std::sort(sorted.rbegin(), sorted.rend());
    if (sorted[0] - sorted[1] <= 4e-4 * scale) continue;  // a near-tie: either id is right
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(output[i], best) << trace << " new token " << i;
    ++checked;
  }
  return checked;
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_HF_REFERENCE_CHECK_H_
