// Copyright 2026 The pagedkv Authors.
//
// The context limit an Engine enforces, and the check of a request against it.
//
// Usually the limit is the runner's context (the trained context, or the longer one a RoPE scaling
// gives). One case is capped: dynamic NTK scaling in the per-step mode (Hugging Face's `dynamic`,
// engine/model/runner/step_rope.h) rotates the keys of a step past max_position_embeddings with a
// base that depends on that step's length, so such a key is not a function of its tokens and
// position alone and must never be reused. With key reuse on (prefix caching, chunk reuse, KV
// tiers), the engine therefore stops at max_position_embeddings, where dynamic scaling does nothing
// and every key is the plain RoPE key; with key reuse off it allows the whole scaled context.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(ContextLimit limit,
//                            EngineContextLimit(config, rope, runner->context_length(), options));
//   PAGEDKV_RETURN_IF_ERROR(CheckContext(prompt.size(), max_new_tokens, limit, overrun));
#ifndef PAGEDKV_ENGINE_RUNTIME_CONTEXT_LIMIT_H_
#define PAGEDKV_ENGINE_RUNTIME_CONTEXT_LIMIT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv {

struct ContextLimit {
  int64_t positions = 0;  // positions [0, positions) may be run
  // > positions when capped for key reuse: what the model would accept with reuse off.
  int64_t uncapped_positions = 0;
};

// The limit for an engine over a model of `config` with RoPE `rope`, whose runner accepts
// `runner_context` positions. InvalidArgument for allow_context_overrun together with key reuse
// under per-step dynamic RoPE (keys past the context would be reused wrongly).
absl::StatusOr<ContextLimit> EngineContextLimit(const ModelConfig& config, const RopeConfig& rope,
                                                int64_t runner_context,
                                                const EngineOptions& options);

// OK when a request of `prompt_tokens` generating `max_new_tokens` stays inside `limit` (the last
// sampled token is never run: positions go up to prompt + max_new_tokens - 2), or overrun is
// allowed. InvalidArgument saying what to change otherwise.
absl::Status CheckContext(size_t prompt_tokens, int32_t max_new_tokens, const ContextLimit& limit,
                          bool allow_context_overrun);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_CONTEXT_LIMIT_H_
