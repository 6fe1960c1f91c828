// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: llama2.c checkpoints from bytes. A file either parses into weights whose tensors
// match its header's shapes, or is refused; header sizes that overflow, truncated payloads and
// non-finite weights must all be errors.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pagedkv/model/model_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto weights = pagedkv::ModelWeights::ParseLlama2c(bytes, "fuzz");
  if (!weights.ok()) return 0;
  const pagedkv::ModelConfig& config = weights->config();
  if (config.dim <= 0 || config.n_layers <= 0 || config.vocab_size <= 0) std::abort();
  return 0;
}
