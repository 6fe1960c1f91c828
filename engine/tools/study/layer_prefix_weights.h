// Copyright 2026 The pagedkv Authors.
//
// LayerPrefixWeights: a model made of the first n layers of another (same embedding, same final
// norm and classifier). Its K/V at layer l < n equal the full model's at layer l for the same
// tokens and context, because a layer's K/V depend only on the layers below it. Shifted reuse
// uses it as the cheap "probe" of CacheBlend-style selective recompute: running the probe costs
// n / n_layers of a full forward and yields the fresh K/V at the first layers.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::ModelWeights probe,
//                            pagedkv::LayerPrefixWeights(full_weights, /*num_layers=*/2));
//   // probe.config().n_layers == 2
#ifndef PAGEDKV_ENGINE_TOOLS_STUDY_LAYER_PREFIX_WEIGHTS_H_
#define PAGEDKV_ENGINE_TOOLS_STUDY_LAYER_PREFIX_WEIGHTS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {

// A copy of `weights` keeping layers [0, num_layers). InvalidArgument unless
// 1 <= num_layers <= weights.config().n_layers.
PAGEDKV_EXPORT absl::StatusOr<ModelWeights> LayerPrefixWeights(const ModelWeights& weights,
                                                               int32_t num_layers);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_TOOLS_STUDY_LAYER_PREFIX_WEIGHTS_H_
