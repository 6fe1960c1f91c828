// Copyright 2026 The pagedkv Authors.
//
// ChooseKvPoolSize (see kv_pool_size.h).
#include "engine/runtime/kv_pool_size.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/dtype.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::engine_internal {

int64_t KvBlockBytes(const EngineOptions& options, const ModelConfig& config,
                     int32_t layers_per_block) {
  const int32_t layers = layers_per_block > 0 ? layers_per_block : config.n_layers;
  return int64_t{layers} * options.block_size * KvTokenRowBytes(options, config);
}

int64_t KvTokenRowBytes(const EngineOptions& options, const ModelConfig& config) {
  return int64_t{config.n_kv_heads} * (KvRowBytes(options.kv_dtype, config.head_dim()) +
                                       KvRowBytes(options.KvDTypeV(), config.head_dim()));
}

absl::Status CheckKvDTypeFits(DType dtype, int32_t head_dim, const char* flag) {
  if (!IsValidDType(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the KV cache dtype of ", flag, " is not a DType value"));
  }
  if (head_dim % KvRowValuesMultiple(dtype) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("KV cache dtype ", DTypeName(dtype), " (", flag, ") stores blocks of ",
                   KvRowValuesMultiple(dtype), " values, but the model's head_dim is ", head_dim,
                   "; use int8, fp8_e4m3 or fp8_e5m2 (a scale per head)"));
}

absl::Status CheckKvDTypesFit(const EngineOptions& options, int32_t head_dim) {
  const bool split = options.kv_dtype_v.has_value();
  PAGEDKV_RETURN_IF_ERROR(CheckKvDTypeFits(options.kv_dtype, head_dim,
                                           split ? "--kv-cache-dtype-k" : "--kv-cache-dtype"));
  return CheckKvDTypeFits(options.KvDTypeV(), head_dim, "--kv-cache-dtype-v");
}

int64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

absl::StatusOr<KvPoolSize> ChooseKvPoolSize(const EngineOptions& options, const ModelConfig& config,
                                            int64_t context_length, const KvCacheLayout& layout) {
  PAGEDKV_RETURN_IF_ERROR(CheckKvDTypesFit(options, config.head_dim()));
  const int64_t block_bytes =
      KvBlockBytes(options, config, layout.hybrid ? layout.layers_per_block : 0);
  const int64_t groups = layout.hybrid ? static_cast<int64_t>(layout.groups.size()) : 1;
  KvPoolSize size;
  if (options.num_kv_blocks > 0) {
    size.num_blocks = options.num_kv_blocks;
    size.reason = "num_kv_blocks (--num-kv-blocks)";
  } else if (options.kv_cache_memory > 0) {
    if (options.kv_cache_memory < block_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("EngineOptions.kv_cache_memory = ", options.kv_cache_memory,
                       " bytes is less than one KV block (", block_bytes, " bytes); raise it"));
    }
    size.num_blocks = options.kv_cache_memory / block_bytes;
    size.reason =
        absl::StrCat("kv_cache_memory (--kv-cache-memory) ", options.kv_cache_memory, " bytes");
  } else {
    const int64_t tokens = options.kv_token_budget;
    // One more block per sequence of slack for a partly filled last block is in NumBlocksFor.
    size.num_blocks =
        groups * (tokens > 0 ? NumBlocksFor(tokens, options.block_size) + 1
                             : 32 * NumBlocksFor(context_length + 1, options.block_size));
    size.reason = tokens > 0 ? absl::StrCat("room for this run's ", tokens, " tokens")
                             : "room for 32 sequences of the full context";
    const int64_t available = AvailableMemoryBytes();
    if (available > 0 && size.num_blocks > available / 2 / block_bytes) {
      size.num_blocks = std::max<int64_t>(1, available / 2 / block_bytes);
      size.reason =
          absl::StrCat(size.reason, ", capped at half of the ", available >> 20, " MiB available");
    }
  }
  if (size.num_blocks > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("EngineOptions: ", size.num_blocks,
                                                   " KV blocks is too many; set num_kv_blocks or "
                                                   "kv_cache_memory"));
  }
  size.bytes = size.num_blocks * block_bytes;
  size.dtype = options.kv_dtype;
  size.v_dtype = options.KvDTypeV();
  size.bytes_per_token = int64_t{config.n_layers} * KvTokenRowBytes(options, config);
  size.tokens = size.num_blocks * options.block_size / groups;
  return size;
}

}  // namespace pagedkv::engine_internal
