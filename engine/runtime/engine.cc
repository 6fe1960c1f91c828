// Copyright 2026 The pagedkv Authors.
//
// Engine setup: the options' checks, Create / Load, and Init (the model runner, the KV cache
// manager, the scheduler, the tiers and chunk reuse). The other parts: engine_admission.cc
// (requests in), engine_step.cc (the step loop), engine_outputs.cc (sampled tokens and results),
// engine_tiers.cc (the KV tiers).
#include "pagedkv/runtime/engine.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/backend.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/context_limit.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/engine_request.h"  // ~Engine destroys the records
#include "engine/runtime/kv_groups.h"
#include "engine/runtime/kv_pool_size.h"
#include "engine/runtime/shift/runner_kv_mover.h"
#include "engine/runtime/weights_digest.h"
#include "kernels/cpu/int8_linear.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// The options' own checks (sizes, chunk reuse against the model's layers).
absl::Status ValidateEngineOptions(const EngineOptions& options, const ModelConfig& c) {
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineOptions.block_size must be positive, got ", options.block_size));
  }
  if (options.num_threads < 0 || options.num_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineOptions.num_threads must be in [0, 1024] (0: all hardware threads), ",
                     "got ", options.num_threads));
  }
  if (options.num_kv_blocks < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EngineOptions.num_kv_blocks must be >= 0 (0: automatic), got ", options.num_kv_blocks));
  }
  if (options.kv_cache_memory < 0 || options.kv_token_budget < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EngineOptions.kv_cache_memory and kv_token_budget must be >= 0 (0: automatic), got ",
        options.kv_cache_memory, " and ", options.kv_token_budget));
  }
  const ChunkReuseOptions& reuse = options.chunk_reuse;
  if (!(reuse.recompute_fraction >= 0.0 && reuse.recompute_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineOptions.chunk_reuse.recompute_fraction must be in [0, 1], got ",
                     reuse.recompute_fraction));
  }
  if (reuse.recompute_fraction > 0.0 && reuse.mode != ChunkReuseMode::kReRotate) {
    return absl::InvalidArgumentError(
        "EngineOptions.chunk_reuse.recompute_fraction > 0 (CacheBlend) needs mode kReRotate");
  }
  if (reuse.float_keys_memory < 0 ||
      (reuse.float_keys_memory > 0 && reuse.mode != ChunkReuseMode::kReRotate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EngineOptions.chunk_reuse.float_keys_memory must be >= 0 (0: off) and needs mode "
        "kReRotate, got ",
        reuse.float_keys_memory));
  }
  const SpeculativeOptions& spec = options.speculative;
  if (spec.num_speculative_tokens < 0 || spec.num_speculative_tokens > 64 ||
      spec.prompt_lookup_min < 1 || spec.prompt_lookup_max < spec.prompt_lookup_min ||
      spec.prompt_lookup_max > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineOptions.speculative needs num_speculative_tokens in [0, 64] (got ",
                     spec.num_speculative_tokens,
                     ") and 1 <= prompt_lookup_min <= prompt_lookup_max <= 64 (got ",
                     spec.prompt_lookup_min, ", ", spec.prompt_lookup_max, ")"));
  }
  if (reuse.deviation_layer < 0 ||
      (reuse.recompute_fraction > 0.0 && reuse.deviation_layer >= c.n_layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("EngineOptions.chunk_reuse.deviation_layer must be in [0, ", c.n_layers,
                     ") (the model's layers), got ", reuse.deviation_layer));
  }
  return absl::OkStatus();
}

// "|kv_v=<dtype>" when V's dtype differs from K's, else nothing (fingerprints of one-dtype caches
// stay as they were).
std::string KvDTypeVFingerprint(const EngineOptions& options) {
  if (options.KvDTypeV() == options.kv_dtype) return "";
  return absl::StrCat("|kv_v=", DTypeName(options.KvDTypeV()));
}

}  // namespace

Engine::Engine() = default;
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::shared_ptr<const ModelWeights> weights,
                                                       const EngineOptions& options,
                                                       std::shared_ptr<const Tokenizer> tokenizer) {
  if (weights == nullptr) return absl::InvalidArgumentError("Engine: weights are null");
  // A Hugging Face model may have more embedding rows than tokens (Qwen2 pads its vocabulary).
  const bool padded_ok = tokenizer != nullptr && tokenizer->bpe() != nullptr &&
                         tokenizer->vocab_size() < weights->config().vocab_size;
  if (tokenizer != nullptr && tokenizer->vocab_size() != weights->config().vocab_size &&
      !padded_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("Engine: the tokenizer has ", tokenizer->vocab_size(),
                     " tokens but the model's vocab_size is ", weights->config().vocab_size));
  }
  std::unique_ptr<Engine> engine(new Engine());
  engine->options_ = options;
  engine->tokenizer_ = std::move(tokenizer);
  PAGEDKV_RETURN_IF_ERROR(engine->Init(std::move(weights)));
  return engine;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& model_path,
                                                     const std::string& tokenizer_path,
                                                     const EngineOptions& options) {
  // Block-format weights need the CPU backend; a run that gets CUDA loads fp32.
  const bool cuda = options.backend == BackendKind::kCuda ||
                    (options.backend == BackendKind::kAuto && CudaBackendAvailable());
  const WeightStorage storage = cuda ? WeightStorage::kF32 : options.weights;
  PAGEDKV_ASSIGN_OR_RETURN(
      LoadedModel model,
      LoadModel(model_path, {.tokenizer_path = tokenizer_path, .weights = storage}));
  return Create(std::move(model.weights), options, std::move(model.tokenizer));
}

absl::Status Engine::Init(std::shared_ptr<const ModelWeights> weights) {
  const ModelConfig& c = weights->config();
  PAGEDKV_RETURN_IF_ERROR(ValidateEngineOptions(options_, c));
  // The int8 kernel is chosen before the runner prepares its weights for it (Int8Tiles); a failed
  // Init restores the process's previous choice.
  const cpu::Int8KernelChoice previous_int8_kernel = cpu::CurrentInt8KernelChoice();
  if (!options_.int8_kernel.empty()) {
    PAGEDKV_RETURN_IF_ERROR(cpu::ForceInt8Kernel(options_.int8_kernel.c_str()));
  }
  auto restore_int8_kernel =
      absl::MakeCleanup([&] { cpu::RestoreInt8KernelChoice(previous_int8_kernel); });
  const RopeConfig rope = options_.rope.value_or(DefaultRopeConfig(c));
  const int64_t context = ContextLengthFor(c, rope);
  PAGEDKV_ASSIGN_OR_RETURN(kv_layout_, engine_internal::ChooseKvCacheLayout(options_, c));
  kv_layout_.dtype = options_.kv_dtype;
  kv_layout_.v_dtype = options_.KvDTypeV();
  PAGEDKV_ASSIGN_OR_RETURN(kv_pool_,
                           engine_internal::ChooseKvPoolSize(options_, c, context, kv_layout_));
  const int64_t num_blocks = kv_pool_.num_blocks;
  ModelRunnerOptions runner_options;
  runner_options.backend = options_.backend;
  runner_options.num_threads = options_.num_threads;
  runner_options.num_blocks = static_cast<int32_t>(num_blocks);
  runner_options.block_size = options_.block_size;
  runner_options.kv_dtype = options_.kv_dtype;
  runner_options.kv_dtype_v = options_.KvDTypeV();
  runner_options.activations = options_.activations;
  runner_options.rope = rope;
  runner_options.layer_kv_group = kv_layout_.layer_group;  // empty unless hybrid
  // Before the runner: it may let the pages of weights it copies go (ReleaseInPlaceRows), which
  // the digest's samples would read back.
  const uint64_t weights_digest = WeightsDigest(*weights);
  internals_ = std::make_unique<Internals>();
  PAGEDKV_ASSIGN_OR_RETURN(internals_->runner,
                           ModelRunner::Create(std::move(weights), runner_options));
  ModelRunner* runner = internals_->runner.get();
  internals_->copier = std::make_unique<BlockKvCopier>(runner);
  PAGEDKV_ASSIGN_OR_RETURN(
      internals_->context,
      EngineContextLimit(c, runner->rope_config(), runner->context_length(), options_));

  // The weights' digest too: tiers (a disk tier outlives the process) must never hand one
  // checkpoint's KV to another of the same shape.
  PAGEDKV_RETURN_IF_ERROR(CreateKvCache(
      absl::StrCat(options_.model_id, "|", c.ToString(), "|", runner->rope_config().Fingerprint(),
                   "|kv=", DTypeName(options_.kv_dtype), KvDTypeVFingerprint(options_),
                   "|w=", absl::Hex(weights_digest))));
  PAGEDKV_RETURN_IF_ERROR(CreateTiers());
  PAGEDKV_RETURN_IF_ERROR(CreateChunkReuse());
  std::move(restore_int8_kernel).Cancel();
  return absl::OkStatus();
}

absl::Status Engine::CreateKvCache(const std::string& fingerprint) {
  const ModelConfig& c = internals_->runner->config();
  const auto num_blocks = static_cast<int32_t>(kv_pool_.num_blocks);
  SchedulerOptions scheduler_options = options_.scheduler;
  scheduler_options.max_model_len =
      options_.allow_context_overrun ? 0 : static_cast<int32_t>(internals_->context.positions + 1);
  KvCacheManagerOptions cache_options;
  cache_options.num_blocks = num_blocks;
  cache_options.block_size = options_.block_size;
  cache_options.enable_prefix_caching = options_.enable_prefix_caching;
  cache_options.eviction_policy = options_.eviction_policy;
  cache_options.collect_block_metrics = options_.collect_block_metrics;
  cache_options.enable_priorities = options_.enable_cache_priorities;
  cache_options.max_high_priority_fraction = options_.max_high_priority_fraction;
  cache_options.vocab_size = c.vocab_size;
  cache_options.model_fingerprint = fingerprint;
  if (kv_layout_.hybrid) cache_options.groups = kv_layout_.groups;
  PAGEDKV_ASSIGN_OR_RETURN(cache_, KvCacheManager::Create(std::move(cache_options)));
  PAGEDKV_ASSIGN_OR_RETURN(scheduler_, Scheduler::Create(scheduler_options, *cache_));
  return absl::OkStatus();
}

absl::Status Engine::CreateChunkReuse() {
  const ChunkReuseOptions& reuse = options_.chunk_reuse;
  switch (reuse.mode) {
    case ChunkReuseMode::kOff:
      return absl::OkStatus();
    case ChunkReuseMode::kReRotate: {
      PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index, cache_->AttachChunkIndex());
      PAGEDKV_ASSIGN_OR_RETURN(
          internals_->reuse,
          CreateRunnerChunkReuse(internals_->runner.get(), std::move(index),
                                 {.first_k = reuse.first_k,
                                  .recompute_fraction = reuse.recompute_fraction,
                                  .deviation_layer = reuse.deviation_layer,
                                  .model_fingerprint = cache_->options().model_fingerprint,
                                  .groups = cache_->options().groups,
                                  .float_keys_bytes = reuse.float_keys_memory}));
      scheduler_->SetChunkReuseProvider(internals_->reuse.get());
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("EngineOptions.chunk_reuse.mode must be kOff or kReRotate");
}

const std::string& Engine::kv_cache_fingerprint() const {
  return cache_->options().model_fingerprint;
}

absl::Status Engine::WriteKvCachePrometheus(std::string* out,
                                            const PrometheusOptions& options) const {
  return cache_->WritePrometheus(out, options);
}

int64_t Engine::context_length() const { return internals_->context.positions; }
const ModelConfig& Engine::config() const { return internals_->runner->config(); }
std::string Engine::backend_name() const {
  ModelRunner& runner = *internals_->runner;
  std::string name = runner.backend().name();
  if (runner.weights().has_native() && runner.backend().kind() == BackendKind::kCpu) {
    const bool int8 = runner.options().activations == ActivationType::kInt8;
    absl::StrAppend(&name, ", native weights x ",
                    int8 ? absl::StrCat("int8 activations (", cpu::Int8KernelName(), ")")
                         : std::string("fp32 activations"));
  }
  return name;
}

bool Engine::HasUnfinishedRequests() const { return scheduler_->HasUnfinishedRequests(); }

}  // namespace pagedkv
