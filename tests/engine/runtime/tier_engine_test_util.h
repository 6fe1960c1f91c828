// Copyright 2026 The pagedkv Authors.
//
// Helpers shared by the engine's tier tests (host, disk, Redis): a tiny llama2.c model, random
// prompts, one request run to the end, a tier's counters by name.
#ifndef PAGEDKV_TESTS_ENGINE_RUNTIME_TIER_ENGINE_TEST_UTIL_H_
#define PAGEDKV_TESTS_ENGINE_RUNTIME_TIER_ENGINE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/tiny_llama2c.h"

namespace pagedkv::testing {

// A tiny llama2.c model (seq_len 96, its own classifier) drawn from `seed`.
inline std::shared_ptr<const ModelWeights> TinyTierModel(uint32_t seed) {
  TinyShape shape;
  shape.seq_len = 96;
  shape.shared_classifier = false;
  const auto path = WriteTempFile("tier_model_" + std::to_string(seed) + ".bin",
                                  MakeTinyLlama2c(shape, seed).FileBytes());
  return std::make_shared<const ModelWeights>(ModelWeights::LoadLlama2c(path.string()).value());
}

inline std::unique_ptr<Engine> MakeTierEngine(std::shared_ptr<const ModelWeights> weights,
                                              const EngineOptions& o) {
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(std::move(weights), o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(e).value() : nullptr;
}

// `n` tokens in [3, 64) drawn from `seed`.
inline std::vector<TokenId> RandomPrompt(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % 61);
  return t;
}

inline GenerationResult RunOne(Engine& engine, const GenerationRequest& r) {
  absl::StatusOr<std::vector<GenerationResult>> out = engine.Generate({r});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : GenerationResult{};
}

// The counters of the engine's tier `tier` ("host", "disk", "remote"); a test failure if none.
inline TierStats TierStatsNamed(const Engine& engine, const std::string& tier) {
  for (const auto& [name, s] : engine.tier_stats()) {
    if (name == tier) return s;
  }
  ADD_FAILURE() << "no " << tier << " tier";
  return {};
}

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_RUNTIME_TIER_ENGINE_TEST_UTIL_H_
