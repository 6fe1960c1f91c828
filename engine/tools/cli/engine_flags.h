// Copyright 2026 The pagedkv Authors.
//
// The model and engine flags that `pagedkv generate` and `pagedkv serve` share (same names, same
// meaning): --model, --tokenizer, --backend, --threads, --weights, --activations, --int8-kernel,
// --block-size, --num-kv-blocks, --kv-cache-memory, --kv-cache-dtype (-k / -v),
// --max-batched-tokens,
// --speculative,
// --no-prefix-caching, --allow-context-overrun; and the EngineOptions they set.
//
// Example:
//   auto flags = std::make_shared<EngineFlags>();
//   AddModelFlags(cmd, flags.get());
//   AddEngineFlags(cmd, flags.get());
//   ...  // in the callback:
//   PAGEDKV_ASSIGN_OR_RETURN(EngineOptions options, EngineOptionsFrom(*flags));
#ifndef PAGEDKV_ENGINE_TOOLS_CLI_ENGINE_FLAGS_H_
#define PAGEDKV_ENGINE_TOOLS_CLI_ENGINE_FLAGS_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::cli {

struct EngineFlags {
  std::string model;
  std::string tokenizer;
  bool no_prefix_caching = false;
  bool allow_context_overrun = false;
  std::string backend = "auto";
  int32_t threads = 0;               // 0: all hardware threads
  std::string weights = "native";    // "native" (GGUF blocks kept) or "f32"
  std::string activations = "int8";  // "int8" or "f32" (native Q4_0 / Q4_1 / Q8_0 weights)
  std::string int8_kernel = "auto";  // EngineOptions::int8_kernel
  int32_t block_size = 16;
  int32_t num_kv_blocks = 0;
  std::string kv_cache_memory;  // "" (automatic) or a size: bytes, or with a K, M or G suffix
  std::string kv_cache_dtype = "auto";  // EngineOptions::kv_dtype; auto: f32, as before
  std::string kv_cache_dtype_k;         // "" : kv_cache_dtype (llama.cpp's -ctk)
  std::string kv_cache_dtype_v;         // "" : kv_cache_dtype (llama.cpp's -ctv)
  int32_t max_batched_tokens = 2048;
  std::string speculative;               // "ngram:K" (prompt lookup, K drafts per step); empty: off
  std::string hybrid_kv_cache = "auto";  // auto, on or off (EngineOptions::hybrid_kv_cache)
};

// --model (required) and --tokenizer.
void AddModelFlags(CLI::App* cmd, EngineFlags* flags);

// A size flag: "1073741824", "512M", "2G" (K, M, G: powers of 1024) -> bytes; InvalidArgument
// naming `flag_name` otherwise.
absl::StatusOr<int64_t> ParseByteSize(std::string_view flag_name, const std::string& flag);
// The engine flags above.
void AddEngineFlags(CLI::App* cmd, EngineFlags* flags);

// The EngineOptions the flags set (on DefaultEngineOptions()). InvalidArgument for a bad
// --backend, --weights, --kv-cache-memory, --kv-cache-dtype or --speculative.
absl::StatusOr<EngineOptions> EngineOptionsFrom(const EngineFlags& flags);

}  // namespace pagedkv::cli

#endif  // PAGEDKV_ENGINE_TOOLS_CLI_ENGINE_FLAGS_H_
