// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/context_limit.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/step_rope.h"

namespace pagedkv {
namespace {

bool ReusesKeys(const EngineOptions& options) {
  return options.enable_prefix_caching || options.chunk_reuse.mode != ChunkReuseMode::kOff;
}

}  // namespace

absl::StatusOr<ContextLimit> EngineContextLimit(const ModelConfig& config, const RopeConfig& rope,
                                                int64_t runner_context,
                                                const EngineOptions& options) {
  ContextLimit limit{.positions = runner_context, .uncapped_positions = runner_context};
  if (!RopeDependsOnStepLength(rope) || !ReusesKeys(options)) return limit;
  if (options.allow_context_overrun) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EngineOptions: allow_context_overrun with dynamic RoPE scaling and key reuse (prefix "
        "caching or chunk reuse): a key past position ",
        config.seq_len,
        " depends on the step that wrote it and must not be reused; turn prefix caching and chunk "
        "reuse off, or drop allow_context_overrun"));
  }
  limit.positions = std::min<int64_t>(runner_context, config.seq_len);
  return limit;
}

absl::Status CheckContext(size_t prompt_tokens, int32_t max_new_tokens, const ContextLimit& limit,
                          bool allow_context_overrun) {
  const int64_t last_position = static_cast<int64_t>(prompt_tokens) + max_new_tokens - 2;
  if (allow_context_overrun || last_position < limit.positions) return absl::OkStatus();
  if (last_position < limit.uncapped_positions) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AddRequest: prompt (", prompt_tokens, " tokens) + max_new_tokens (", max_new_tokens,
        ") would run the model at position ", last_position, ", past ", limit.positions,
        ": this model's dynamic RoPE scaling makes keys past that position depend on the step "
        "that wrote them, so with prefix caching or chunk reuse on the engine stops there; turn "
        "both off (--no-prefix-caching) to use the scaled context of ",
        limit.uncapped_positions, " positions"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "AddRequest: prompt (", prompt_tokens, " tokens) + max_new_tokens (", max_new_tokens,
      ") would run the model at position ", last_position, ", past its trained context of ",
      limit.positions,
      " positions; shorten the prompt or max_new_tokens, configure RoPE scaling for a longer "
      "context, or set EngineOptions.allow_context_overrun to run it anyway (the output is "
      "then extrapolation)"));
}

}  // namespace pagedkv
