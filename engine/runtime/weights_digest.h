// Copyright 2026 The pagedkv Authors.
//
// WeightsDigest: a 64-bit digest of a checkpoint's weights that the engine puts into the model
// fingerprint (the prefix cache's root, so every block hash and every tier key): two checkpoints
// of one architecture (a fine-tune, a merged LoRA, a retrained model) then never share cached KV,
// in memory, on disk (which outlives the process) or in Redis. It hashes every norm vector whole
// and 16 evenly spaced 64-byte samples of every matrix (a fine-tune or a merged low-rank update
// changes every element of the matrices it touches), in their stored format: microseconds, not a
// pass over gigabytes. Two checkpoints that differ only away from every sample are not told apart.
//
// Example:
//   const std::string fingerprint = absl::StrCat(model_id, "|w=", absl::Hex(WeightsDigest(w)));
#ifndef PAGEDKV_ENGINE_RUNTIME_WEIGHTS_DIGEST_H_
#define PAGEDKV_ENGINE_RUNTIME_WEIGHTS_DIGEST_H_

#include <cstdint>

#include "pagedkv/model/model_weights.h"

namespace pagedkv {

uint64_t WeightsDigest(const ModelWeights& weights);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_WEIGHTS_DIGEST_H_
