// Copyright 2026 The pagedkv Authors.
//
// The Engine's KV cache layout (EngineOptions::hybrid_kv_cache, issue #31): which layers form
// which KV cache group, by vLLM's rule. Full-attention layers are one kind and each sliding
// window another; every kind splits into groups of n layers, n = the smallest kind's count, so
// that one block's page holds one layer of each group (n page arrays). When a kind's count is not
// a multiple of n, or no layer is full attention (a KvCacheManager needs a full group), the
// model cannot use the hybrid layout.
//
// Example (Qwen2 with 4 layers, the last 2 windowed at 8): groups {full x2, window 8 x2},
// layer_group {0, 0, 1, 1}, layers_per_block 2.
//   PAGEDKV_ASSIGN_OR_RETURN(KvCacheLayout layout, ChooseKvCacheLayout(options, config));
#ifndef PAGEDKV_ENGINE_RUNTIME_KV_GROUPS_H_
#define PAGEDKV_ENGINE_RUNTIME_KV_GROUPS_H_

#include <string>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::engine_internal {

// The hybrid layout of `config` (see the banner); FailedPrecondition saying why there is none.
PAGEDKV_EXPORT absl::StatusOr<KvCacheLayout> HybridKvCacheLayout(const ModelConfig& config);

// The options that need a plain KvCacheManager, named ("" when none).
PAGEDKV_EXPORT std::string HybridIncompatibleOptions(const EngineOptions& options);

// The layout options.hybrid_kv_cache picks for `config`: kOff or kAuto without a hybrid layout
// (or with an incompatible option): all layers in one plain cache, reason saying why;
// InvalidArgument when kOn cannot be honoured.
PAGEDKV_EXPORT absl::StatusOr<KvCacheLayout> ChooseKvCacheLayout(const EngineOptions& options,
                                                                 const ModelConfig& config);

}  // namespace pagedkv::engine_internal

#endif  // PAGEDKV_ENGINE_RUNTIME_KV_GROUPS_H_
