// Copyright 2026 The pagedkv Authors.
//
// The model and engine flags of `generate` and `serve` (see engine_flags.h).
#include "engine/tools/cli/engine_flags.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/tools/cli/flag_checks.h"
#include "engine/tools/cli/tier_flags.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cli {
namespace {

// --speculative: "ngram:K" with K in [1, 64] (empty: off).
absl::StatusOr<SpeculativeOptions> ParseSpeculative(const std::string& flag) {
  SpeculativeOptions spec;
  if (flag.empty()) return spec;
  int32_t k = 0;
  if (!absl::StartsWith(flag, "ngram:") || !absl::SimpleAtoi(flag.substr(6), &k) || k < 1 ||
      k > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--speculative '", flag, "': expected ngram:K with K in [1, 64] draft tokens per step"));
  }
  spec.num_speculative_tokens = k;
  return spec;
}

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(std::string_view flag_name, const std::string& flag) {
  std::string digits = flag;
  int shift = 0;
  if (!digits.empty()) {
    const char unit = digits.back();
    shift = unit == 'K' || unit == 'k'   ? 10
            : unit == 'M' || unit == 'm' ? 20
            : unit == 'G' || unit == 'g' ? 30
                                         : 0;
    if (shift > 0) digits.pop_back();
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n) || n <= 0 || n > (INT64_MAX >> shift)) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(flag_name), " '", flag,
                     "': expected a positive size in bytes, or with K, M or G"));
  }
  return n << shift;
}

void AddModelFlags(CLI::App* cmd, EngineFlags* flags) {
  cmd->add_option("--model", flags->model,
                  "llama2.c checkpoint (legacy v0 .bin), a Hugging Face model directory "
                  "(config.json, *.safetensors, tokenizer.json), or a GGUF file (llama)")
      ->required();
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "llama2.c tokenizer .bin for a .bin model (a Hugging Face directory uses its "
                  "tokenizer.json unless this names another)");
}

void AddEngineFlags(CLI::App* cmd, EngineFlags* flags) {
  cmd->add_flag("--no-prefix-caching", flags->no_prefix_caching, "disable prefix caching");
  cmd->add_flag("--allow-context-overrun", flags->allow_context_overrun,
                "allow positions past the model's trained context");
  cmd->add_option("--backend", flags->backend, "auto, cpu or cuda");
  cmd->add_option("--threads", flags->threads,
                  "CPU backend threads, 0 = all hardware threads (default); same output for any")
      ->check(NumberIn(0, 1024));
  cmd->add_option("--weights", flags->weights,
                  "native (default): keep a GGUF file's Q4_0 / Q4_1 / Q8_0 / Q4_K / Q6_K / F16 / "
                  "BF16 matrices (safetensors: F16 / BF16) in that format (CPU backend: a "
                  "fraction of the memory, faster decode and prefill); f32: convert every weight "
                  "to fp32 at load (the CUDA backend always does)")
      ->check(CLI::IsMember({"native", "f32"}));
  cmd->add_option("--activations", flags->activations,
                  "int8 (default) or f32: how native Q4_0 / Q4_1 / Q8_0 weights multiply the "
                  "activations on the CPU (int8: activations quantized per 32 values, integer dot "
                  "products, 1.4-1.9x prefill and batched decode; f32: decoded weights times fp32 "
                  "activations, closer to --weights f32; docs/kernels.md)")
      ->check(CLI::IsMember({"f32", "int8"}));
  cmd->add_option("--int8-kernel", flags->int8_kernel,
                  "force the CPU's int8 kernel for comparisons: auto (default: the best this CPU "
                  "runs, named in the banner), avx512vnni, avx2 or portable; same output for any")
      ->check(CLI::IsMember({"auto", "avx512vnni", "avx2", "portable"}));
  cmd->add_option("--block-size", flags->block_size, "tokens per KV block")
      ->check(PositiveNumber());
  cmd->add_option("--num-kv-blocks", flags->num_kv_blocks, "KV blocks (0 = automatic)")
      ->check(NonNegativeNumber());
  cmd->add_option("--kv-cache-memory", flags->kv_cache_memory,
                  "bytes for the KV pool when --num-kv-blocks is 0, e.g. 512M or 2G (default: "
                  "what this run's requests can use, at most half of the available memory)");
  cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype,
                  "KV cache storage: auto (f32), f16, bf16, int8, fp8_e4m3 (fp8), fp8_e5m2 "
                  "(a scale per token and head), q8_0, q4_0, q4_1 (GGUF 32-value blocks, head "
                  "size a multiple of 32); 8-bit types hold ~2x the tokens of bf16 in the same "
                  "--kv-cache-memory, q4_0 ~3.5x (docs/kernels.md#quantized-kv-cache)");
  cmd->add_option("--kv-cache-dtype-k", flags->kv_cache_dtype_k,
                  "K's dtype (default: --kv-cache-dtype), as llama.cpp's -ctk");
  cmd->add_option("--kv-cache-dtype-v", flags->kv_cache_dtype_v,
                  "V's dtype (default: --kv-cache-dtype), as llama.cpp's -ctv: e.g. -k q8_0 "
                  "-v q4_0 keeps the sensitive keys at 8 bits");
  cmd->add_option("--max-batched-tokens", flags->max_batched_tokens,
                  "token budget per step (smaller = chunked prefill)")
      ->check(PositiveNumber());
  cmd->add_option("--speculative", flags->speculative,
                  "speculative decoding: ngram:K proposes K draft tokens per step by prompt "
                  "lookup (greedy requests; same ids as without it)");
  cmd->add_option("--hybrid-kv-cache", flags->hybrid_kv_cache,
                  "KV cache groups for sliding-window layers, whose out-of-window blocks are "
                  "freed (same ids, less KV memory): auto (default: on for a model with "
                  "sliding-window and full layers unless CacheBlend's selective recompute needs "
                  "one group), on (refuse what it cannot run) or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

namespace {

// The dtype a KV dtype flag names ("auto": f32, the compute dtype); InvalidArgument naming `flag`.
absl::StatusOr<DType> KvDTypeFlag(const std::string& value, const char* flag) {
  absl::StatusOr<DType> dtype = ParseDType(value == "auto" ? "f32" : value);
  if (dtype.ok()) return dtype;
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", dtype.status().message()));
}

// --kv-cache-dtype and its K / V overrides into options.kv_dtype and kv_dtype_v (set only when V's
// dtype differs from K's).
absl::Status SetKvCacheDTypes(const EngineFlags& flags, EngineOptions* options) {
  const bool k_given = !flags.kv_cache_dtype_k.empty(), v_given = !flags.kv_cache_dtype_v.empty();
  PAGEDKV_ASSIGN_OR_RETURN(const DType both, KvDTypeFlag(flags.kv_cache_dtype, "--kv-cache-dtype"));
  DType k = both, v = both;
  if (k_given) {
    PAGEDKV_ASSIGN_OR_RETURN(k, KvDTypeFlag(flags.kv_cache_dtype_k, "--kv-cache-dtype-k"));
  }
  if (v_given) {
    PAGEDKV_ASSIGN_OR_RETURN(v, KvDTypeFlag(flags.kv_cache_dtype_v, "--kv-cache-dtype-v"));
  }
  options->kv_dtype = k;
  options->kv_dtype_v = v == k ? std::nullopt : std::optional<DType>(v);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EngineOptions> EngineOptionsFrom(const EngineFlags& flags) {
  EngineOptions options = DefaultEngineOptions();
  PAGEDKV_ASSIGN_OR_RETURN(options.backend, ParseBackendKind(flags.backend));
  options.num_threads = flags.threads;
  if (flags.weights != "native" && flags.weights != "f32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--weights '", flags.weights, "': expected native or f32"));
  }
  options.weights = flags.weights == "f32" ? WeightStorage::kF32 : WeightStorage::kNative;
  if (flags.activations != "f32" && flags.activations != "int8") {
    return absl::InvalidArgumentError(
        absl::StrCat("--activations '", flags.activations, "': expected f32 or int8"));
  }
  options.activations = flags.activations == "int8" ? ActivationType::kInt8 : ActivationType::kF32;
  options.int8_kernel = flags.int8_kernel;
  options.block_size = flags.block_size;
  options.num_kv_blocks = flags.num_kv_blocks;
  if (!flags.kv_cache_memory.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(options.kv_cache_memory,
                             ParseByteSize("--kv-cache-memory", flags.kv_cache_memory));
  }
  PAGEDKV_RETURN_IF_ERROR(SetKvCacheDTypes(flags, &options));
  options.enable_prefix_caching = !flags.no_prefix_caching;
  options.allow_context_overrun = flags.allow_context_overrun;
  options.scheduler.max_num_batched_tokens = flags.max_batched_tokens;
  PAGEDKV_ASSIGN_OR_RETURN(options.speculative, ParseSpeculative(flags.speculative));
  if (flags.hybrid_kv_cache == "auto" || flags.hybrid_kv_cache == "on" ||
      flags.hybrid_kv_cache == "off") {
    options.hybrid_kv_cache = flags.hybrid_kv_cache == "on"    ? HybridKvCacheMode::kOn
                              : flags.hybrid_kv_cache == "off" ? HybridKvCacheMode::kOff
                                                               : HybridKvCacheMode::kAuto;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--hybrid-kv-cache '", flags.hybrid_kv_cache, "': expected auto, on or off"));
  }
  return options;
}

}  // namespace pagedkv::cli
