// Copyright 2026 The pagedkv Authors.
//
// Models for the engine benchmarks, loaded once per process:
//   "aidreams260K": ../shared/data/aidreams260K/aidreams260K.bin (null when absent)
//   "tinystories656K": ../shared/data/tinystories656K, a Hugging Face directory (null when
//                   absent): GQA, half-split RoPE, 512 context
//   "random15M":    random weights in the shape of llama2.c's stories15M (dim 288, 6 layers,
//                   6 heads, hidden 768, vocab 32000, seq_len 256)
//   "random656K":   random weights in the shape of TinyStories-656K (dim 128, 2 layers, 8 heads,
//                   4 KV heads, hidden 384, vocab 2048, seq_len 512), a speed stand-in until the
//                   Hugging Face loader reads the real checkpoint
//
// Example:
//   std::shared_ptr<const ModelWeights> w = BenchModel("random15M");
#ifndef PAGEDKV_BENCH_ENGINE_MODEL_BENCH_MODELS_H_
#define PAGEDKV_BENCH_ENGINE_MODEL_BENCH_MODELS_H_

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "pagedkv/model/model_source.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv::bench {

inline std::shared_ptr<const ModelWeights> BenchModel(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const ModelWeights>>* cache =
      new std::map<std::string, std::shared_ptr<const ModelWeights>>();
  if (auto it = cache->find(name); it != cache->end()) return it->second;
  std::shared_ptr<const ModelWeights> weights;
  std::filesystem::path dir = PAGEDKV_SHARED_DATA_DIR;
  if (const char* env = std::getenv("PAGEDKV_DATA_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  }
  if (name == "tinystories656K") {
    absl::StatusOr<LoadedModel> m = LoadModel((dir / "tinystories656K").string());
    if (m.ok()) weights = m->weights;
  } else if (name == "aidreams260K") {
    absl::StatusOr<ModelWeights> w =
        ModelWeights::LoadLlama2c((dir / "aidreams260K" / "aidreams260K.bin").string());
    if (w.ok()) weights = std::make_shared<const ModelWeights>(std::move(w).value());
  } else if (name == "random656K") {
    ModelConfig c{.dim = 128,
                  .hidden_dim = 384,
                  .n_layers = 2,
                  .n_heads = 8,
                  .n_kv_heads = 4,
                  .vocab_size = 2048,
                  .seq_len = 512};
    absl::StatusOr<ModelWeights> w = ModelWeights::Random(c, {.seed = 656});
    if (w.ok()) weights = std::make_shared<const ModelWeights>(std::move(w).value());
  } else if (name == "random15M") {
    ModelConfig c{.dim = 288,
                  .hidden_dim = 768,
                  .n_layers = 6,
                  .n_heads = 6,
                  .n_kv_heads = 6,
                  .vocab_size = 32000,
                  .seq_len = 256};
    absl::StatusOr<ModelWeights> w = ModelWeights::Random(c, {.seed = 15});
    if (w.ok()) weights = std::make_shared<const ModelWeights>(std::move(w).value());
  }
  (*cache)[name] = weights;
  return weights;
}

}  // namespace pagedkv::bench

#endif  // PAGEDKV_BENCH_ENGINE_MODEL_BENCH_MODELS_H_
