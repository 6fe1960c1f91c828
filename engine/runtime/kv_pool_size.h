// Copyright 2026 The pagedkv Authors.
//
// The KV pool's size when EngineOptions.num_kv_blocks is 0: from a memory budget.
//   kv_cache_memory > 0: that many bytes.
//   else: room for kv_token_budget tokens (what this run's requests can hold; 0: unknown, then 32
//   sequences of the full context), capped at half of the memory available now
//   (/proc/meminfo MemAvailable; no cap where it cannot be read).
// At least one block; the scheduler preempts or refuses what does not fit. The CPU backend maps
// large allocations lazily, so a pool costs address space, not resident memory, until used.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(KvPoolSize size, ChooseKvPoolSize(options, config, context));
#ifndef PAGEDKV_ENGINE_RUNTIME_KV_POOL_SIZE_H_
#define PAGEDKV_ENGINE_RUNTIME_KV_POOL_SIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/dtype.h"
#include "pagedkv/export.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::engine_internal {

// Bytes of K and V of one block over `layers_per_block` layers (0: every layer; a hybrid KV
// cache's block holds one layer of each group's, KvCacheLayout::layers_per_block).
PAGEDKV_EXPORT int64_t KvBlockBytes(const EngineOptions& options, const ModelConfig& config,
                                    int32_t layers_per_block = 0);

// Bytes of K and V of one token of one layer, over its KV heads (K's and V's dtypes).
PAGEDKV_EXPORT int64_t KvTokenRowBytes(const EngineOptions& options, const ModelConfig& config);

// InvalidArgument, naming `flag`, when a row of head_dim values does not fit `dtype`'s blocks
// (q8_0, q4_0, q4_1 need a multiple of 32) or dtype is not a DType value.
PAGEDKV_EXPORT absl::Status CheckKvDTypeFits(DType dtype, int32_t head_dim, const char* flag);

// CheckKvDTypeFits of K's and V's dtypes (naming --kv-cache-dtype, or -k / -v when split).
PAGEDKV_EXPORT absl::Status CheckKvDTypesFit(const EngineOptions& options, int32_t head_dim);

// Bytes the system could give now (MemAvailable), or -1 when unknown.
PAGEDKV_EXPORT int64_t AvailableMemoryBytes();

// The pool for `options` (see the banner); InvalidArgument when it needs more than INT32_MAX
// blocks or kv_cache_memory is below one block.
// A hybrid layout's blocks are KvBlockBytes(.., layout.layers_per_block) each, so a memory budget
// buys more of them; a token budget buys one block per group per block of tokens (the same bytes
// as all-full: sliding-window groups free theirs as requests move past their window).
PAGEDKV_EXPORT absl::StatusOr<KvPoolSize> ChooseKvPoolSize(const EngineOptions& options,
                                                           const ModelConfig& config,
                                                           int64_t context_length,
                                                           const KvCacheLayout& layout = {});

}  // namespace pagedkv::engine_internal

#endif  // PAGEDKV_ENGINE_RUNTIME_KV_POOL_SIZE_H_
