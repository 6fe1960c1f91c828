// Copyright 2026 The pagedkv Authors.
//
// LoadTinyWeights: a TinyLlama2c model written to a temp file and loaded back as the engine
// loads a llama2.c checkpoint (a test failure, not a crash, when loading fails).
#ifndef PAGEDKV_TESTS_ENGINE_MODEL_TINY_WEIGHTS_H_
#define PAGEDKV_TESTS_ENGINE_MODEL_TINY_WEIGHTS_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"
#include "tests/engine/model/tiny_llama2c.h"

namespace pagedkv::testing {

// A tiny shape with `seq_len` positions and a separate classifier (with a tied one a random
// model tends to repeat its input token).
inline TinyShape UntiedShape(int seq_len) {
  TinyShape s;
  s.seq_len = seq_len;
  s.shared_classifier = false;
  return s;
}

// `file_name`: a name under the test temp dir, distinct per test binary's models.
inline std::shared_ptr<const ModelWeights> LoadTinyWeights(const TinyLlama2c& model,
                                                           const std::string& file_name) {
  const auto path = WriteTempFile(file_name, model.FileBytes());
  absl::StatusOr<ModelWeights> w = ModelWeights::LoadLlama2c(path.string());
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return nullptr;
  return std::make_shared<const ModelWeights>(std::move(w).value());
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_MODEL_TINY_WEIGHTS_H_
