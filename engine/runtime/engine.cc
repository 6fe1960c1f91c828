// Copyright 2026 The pagedkv Authors.
#include "pagedkv/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/kv_cache_manager_internal.h"
#include "cache/tier_chain.h"
#include "engine/model/backend.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/context_limit.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/kv_pool_size.h"
#include "engine/runtime/ngram_proposer.h"
#include "engine/shift/cache_blend_hook.h"
#include "engine/shift/engine_chunk_reuse.h"
#include "kernels/sample_math.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kv_cache_manager.h"
#include "pagedkv/model_source.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Bucket of a batch of `num_tokens` (>= 1) tokens in EngineStats::step_num_tokens_histogram.
size_t HistogramBucket(int32_t num_tokens) {
  size_t bucket = 0;
  for (uint32_t n = static_cast<uint32_t>(num_tokens); n > 1; n >>= 1) ++bucket;
  return std::min(bucket, EngineStats::kHistogramBuckets - 1);
}

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
  const RopeConfig rope = options_.rope.value_or(DefaultRopeConfig(c));
  const int64_t context = ContextLengthFor(c, rope);
  PAGEDKV_ASSIGN_OR_RETURN(kv_pool_, engine_internal::ChooseKvPoolSize(options_, c, context));
  const int64_t num_blocks = kv_pool_.num_blocks;
  ModelRunnerOptions runner_options;
  runner_options.backend = options_.backend;
  runner_options.num_threads = options_.num_threads;
  runner_options.num_blocks = static_cast<int32_t>(num_blocks);
  runner_options.block_size = options_.block_size;
  runner_options.kv_dtype = options_.kv_dtype;
  runner_options.rope = rope;
  internals_ = std::make_unique<Internals>();
  PAGEDKV_ASSIGN_OR_RETURN(internals_->runner,
                           ModelRunner::Create(std::move(weights), runner_options));
  ModelRunner* runner = internals_->runner.get();
  PAGEDKV_ASSIGN_OR_RETURN(
      internals_->context,
      EngineContextLimit(c, runner->rope_config(), runner->context_length(), options_));

  KvCacheManagerOptions cache_options;
  cache_options.num_blocks = static_cast<int32_t>(num_blocks);
  cache_options.block_size = options_.block_size;
  cache_options.enable_prefix_caching = options_.enable_prefix_caching;
  cache_options.eviction_policy = options_.eviction_policy;
  cache_options.collect_block_metrics = options_.collect_block_metrics;
  cache_options.enable_priorities = options_.enable_cache_priorities;
  cache_options.max_high_priority_fraction = options_.max_high_priority_fraction;
  cache_options.vocab_size = c.vocab_size;
  cache_options.model_fingerprint =
      absl::StrCat(options_.model_id, "|", c.ToString(), "|", runner->rope_config().Fingerprint(),
                   "|kv=", DTypeName(options_.kv_dtype));
  PAGEDKV_ASSIGN_OR_RETURN(cache_, KvCacheManager::Create(std::move(cache_options)));

  SchedulerOptions scheduler_options = options_.scheduler;
  scheduler_options.max_model_len =
      options_.allow_context_overrun ? 0 : static_cast<int32_t>(internals_->context.positions + 1);
  PAGEDKV_ASSIGN_OR_RETURN(scheduler_, Scheduler::Create(scheduler_options, *cache_));
  PAGEDKV_RETURN_IF_ERROR(CreateTiers());
  return CreateChunkReuse();
}

absl::Status Engine::CreateChunkReuse() {
  const ChunkReuseOptions& reuse = options_.chunk_reuse;
  switch (reuse.mode) {
    case ChunkReuseMode::kOff:
      return absl::OkStatus();
    case ChunkReuseMode::kReRotate: {
      PAGEDKV_ASSIGN_OR_RETURN(
          internals_->reuse,
          EngineChunkReuse::Create(internals_->runner.get(),
                                   &KvCacheManagerInternal::MutablePool(*cache_),
                                   {.first_k = reuse.first_k,
                                    .recompute_fraction = reuse.recompute_fraction,
                                    .deviation_layer = reuse.deviation_layer,
                                    .model_fingerprint = cache_->options().model_fingerprint}));
      scheduler_->SetChunkReuseProvider(internals_->reuse.get());
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("EngineOptions.chunk_reuse.mode must be kOff or kReRotate");
}

int64_t Engine::context_length() const { return internals_->context.positions; }
const ModelConfig& Engine::config() const { return internals_->runner->config(); }
std::string Engine::backend_name() const { return internals_->runner->backend().name(); }

bool Engine::HasUnfinishedRequests() const { return scheduler_->HasUnfinishedRequests(); }

namespace {

// The request's tokens: prompt_tokens, else the encoded prompt_text, else BOS alone.
absl::StatusOr<std::vector<TokenId>> PromptOf(GenerationRequest& request,
                                              const Tokenizer* tokenizer, TokenId bos) {
  if (!request.prompt_tokens.empty()) return std::move(request.prompt_tokens);
  if (request.prompt_text.empty()) return std::vector<TokenId>{bos};
  if (tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        "AddRequest: a text prompt needs an engine with a tokenizer; pass prompt_tokens or "
        "create the engine with one");
  }
  return tokenizer->Encode(request.prompt_text);
}

// max_new_tokens, the sampling options and the prompt's tokens are in range.
absl::Status CheckGenerationRequest(const GenerationRequest& request,
                                    const std::vector<TokenId>& prompt, int32_t vocab_size) {
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddRequest: max_new_tokens must be >= 1, got ", request.max_new_tokens));
  }
  const SamplingOptions& s = request.sampling;
  if (!std::isfinite(s.temperature) || !(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddRequest: sampling needs a finite temperature and top_p in (0, 1], got "
                     "temperature ",
                     s.temperature, ", top_p ", s.top_p));
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("AddRequest: prompt token ", i, " (",
                                                     prompt[i], ") is outside the vocabulary [0, ",
                                                     vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RequestId> Engine::AddRequest(GenerationRequest request) {
  const ModelConfig& c = config();
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> prompt,
                           PromptOf(request, tokenizer_.get(), c.bos_token_id));
  PAGEDKV_RETURN_IF_ERROR(CheckGenerationRequest(request, prompt, c.vocab_size));
  PAGEDKV_RETURN_IF_ERROR(CheckContext(prompt.size(), request.max_new_tokens, internals_->context,
                                       options_.allow_context_overrun));
  const RequestId id = next_id_;
  SchedulerRequest sr;
  sr.id = id;
  sr.prompt = prompt;
  sr.max_new_tokens = request.max_new_tokens;
  sr.priority = request.priority;
  sr.cache_salt = request.cache_salt;
  sr.cache_priority = request.cache_priority;
  sr.cache_priority_spans = request.cache_priority_spans;
  sr.stop_tokens = std::move(request.stop_tokens);
  sr.chunks = request.chunks;
  if (request.stop_at_eos) {
    for (TokenId stop : c.stop_token_ids) sr.stop_tokens.push_back(stop);
  }
  PAGEDKV_RETURN_IF_ERROR(scheduler_->AddRequest(std::move(sr)));
  auto record = std::make_unique<RequestRecord>();
  record->context = prompt;
  record->prompt = std::move(prompt);
  record->sampling = request.sampling;
  record->cache_salt = std::move(request.cache_salt);
  record->chunks = std::move(request.chunks);
  record->chunk_reused.assign(record->chunks.size(), 0);
  record->added = Clock::now();
  requests_.emplace(id, std::move(record));
  if (internals_->tiers != nullptr) internals_->onboard_queue.push_back(id);
  ++next_id_;
  ++stats_.num_requests;
  return id;
}

GenerationResult Engine::MakeResult(RequestId id, const RequestRecord& record,
                                    std::vector<TokenId> output_tokens, FinishReason reason) const {
  GenerationResult result;
  result.request_id = id;
  result.prompt_tokens = record.prompt;
  result.output_tokens = std::move(output_tokens);
  result.finish_reason = reason;
  result.num_prefix_hit_tokens = record.num_prefix_hit_tokens;
  result.num_host_hit_tokens = record.num_host_hit_tokens;
  result.num_remote_hit_tokens = record.num_remote_hit_tokens;
  result.num_device_hit_tokens =
      record.num_prefix_hit_tokens - record.num_host_hit_tokens - record.num_remote_hit_tokens;
  result.num_readmission_hit_tokens = record.num_readmission_hit_tokens;
  result.num_readmission_host_hit_tokens = record.num_readmission_host_hit_tokens;
  result.num_readmission_remote_hit_tokens = record.num_readmission_remote_hit_tokens;
  result.num_readmission_device_hit_tokens = record.num_readmission_hit_tokens -
                                             record.num_readmission_host_hit_tokens -
                                             record.num_readmission_remote_hit_tokens;
  result.num_shifted_hit_tokens = record.num_shifted_hit_tokens;
  result.num_preemptions = std::max(0, record.num_admissions - 1);
  result.time_to_first_token_s = record.time_to_first_token_s;
  result.latency_s = SecondsSince(record.added);
  if (tokenizer_ != nullptr) {
    absl::StatusOr<std::string> text =
        tokenizer_->Decode(result.output_tokens, record.prompt.back());
    // Tokens come from the model's vocabulary, which is the tokenizer's; only a Hugging Face model
    // with padding rows past its tokenizer (Qwen2) can sample an id the tokenizer lacks, and then
    // the text is left empty (the ids are in output_tokens).
    if (text.ok()) result.text = *std::move(text);
  }
  return result;
}

// One step's flattened batch for the runner: padded block tables, one logits row per sequence
// that samples.
struct Engine::StepBatch {
  int32_t max_blocks = 0;
  std::vector<BlockId> tables;  // [num_sequences, max_blocks]
  std::vector<int32_t> kv_lens;
  std::vector<int32_t> logits_indices;
  std::vector<SamplingParams> sampling;  // per logits row
  // Per sequence that samples: its id, its sequence index in the batch, and its first logits row;
  // rows [row_start[i], row_start[i + 1]) are 1 + its draft tokens.
  std::vector<RequestId> sampled_ids;
  std::vector<int32_t> sampled_seqs;
  std::vector<int32_t> row_start = {0};
};

absl::StatusOr<StepOutput> Engine::Step() {
  const Clock::time_point start = Clock::now();
  StepOutput out;
  out.finished = std::move(unclaimed_finished_);
  unclaimed_finished_.clear();
  TierChain* tiers = internals_->tiers.get();
  PAGEDKV_RETURN_IF_ERROR(OnboardWaiting());
  // Unpinned before scheduling: the scheduler cannot see pins, and blocks pinned for waiting
  // requests could leave a running request no room (it preempts itself, nobody is admitted, and
  // the next step pins them again). Released, the loaded blocks are the most recently used
  // cached blocks, evicted last.
  if (tiers != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers->ReleasePins());
  PAGEDKV_RETURN_IF_ERROR(scheduler_->Schedule(&batch_));
  RequeuePreempted();
  out.batch = batch_.stats;
  ReportAborted(&out);
  EngineChunkReuse* reuse = internals_->reuse.get();
  if (reuse != nullptr) PAGEDKV_RETURN_IF_ERROR(reuse->RunMoves(batch_.slot_moves));
  if (batch_.empty()) return out;

  const StepBatch step = BuildStepBatch();
  std::vector<TokenId> sampled;
  PAGEDKV_RETURN_IF_ERROR(RunModel(step, &out.logits, &sampled));
  if (tiers != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers->FlushWriteThrough());
  const int32_t n = batch_.num_sequences();
  if (reuse != nullptr) {
    for (int32_t i = 0; i < n; ++i) PAGEDKV_RETURN_IF_ERROR(RegisterChunks(i));
  }
  PAGEDKV_RETURN_IF_ERROR(CollectOutputs(step, sampled, &out));
  RecordStepStats(n, &out);
  out.seconds = SecondsSince(start);
  stats_.busy_seconds += out.seconds;
  return out;
}

void Engine::ReportAborted(StepOutput* out) {
  // Finished requests come from UpdateFromOutput (CollectOutputs); aborted ones are reported here.
  for (RequestId id : batch_.finished_request_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    out->finished.push_back(MakeResult(id, *it->second, {}, FinishReason::kAborted));
    requests_.erase(it);
    ++stats_.num_finished;
  }
}

void Engine::RecordAdmission(const ScheduledSequence& s, RequestRecord& record) {
  if (s.newly_admitted) {
    const TierHitTokens tier =
        AttributeTierHits(s.num_prefix_hit_tokens, options_.block_size, record.block_sources);
    if (record.num_admissions == 0) {
      record.num_prefix_hit_tokens = s.num_prefix_hit_tokens;
      record.num_host_hit_tokens = tier.host;
      record.num_remote_hit_tokens = tier.remote;
      stats_.num_prompt_tokens += static_cast<int64_t>(record.prompt.size());
      stats_.num_prefix_hit_tokens += s.num_prefix_hit_tokens;
      stats_.num_host_hit_tokens += tier.host;
      stats_.num_remote_hit_tokens += tier.remote;
    } else {
      record.num_readmission_hit_tokens += s.num_prefix_hit_tokens;
      record.num_readmission_host_hit_tokens += tier.host;
      record.num_readmission_remote_hit_tokens += tier.remote;
      ++stats_.num_readmissions;
      stats_.num_readmission_tokens += static_cast<int64_t>(record.context.size());
      stats_.num_readmission_hit_tokens += s.num_prefix_hit_tokens;
      stats_.num_readmission_host_hit_tokens += tier.host;
      stats_.num_readmission_remote_hit_tokens += tier.remote;
    }
    ++record.num_admissions;
    record.awaiting_admission = false;
    record.block_sources.clear();
    std::fill(record.chunk_reused.begin(), record.chunk_reused.end(), 0);
  }
  if (s.num_shifted_hit_tokens > 0) MarkReusedChunk(s, record);
  if (record.num_admissions == 1) {
    record.num_shifted_hit_tokens += s.num_shifted_hit_tokens;
    stats_.num_shifted_hit_tokens += s.num_shifted_hit_tokens;
  }
}

Engine::StepBatch Engine::BuildStepBatch() {
  StepBatch step;
  const int32_t n = batch_.num_sequences();
  for (const ScheduledSequence& s : batch_.sequences) {
    step.max_blocks = std::max(step.max_blocks, s.num_blocks);
  }
  step.tables.assign(static_cast<size_t>(n) * static_cast<size_t>(step.max_blocks), 0);
  step.kv_lens.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    const ScheduledSequence& s = batch_.sequences[static_cast<size_t>(i)];
    const auto table = batch_.BlockTable(i);
    std::copy(table.begin(), table.end(),
              step.tables.begin() + static_cast<ptrdiff_t>(i) * step.max_blocks);
    step.kv_lens[static_cast<size_t>(i)] = s.seq_len();
    RequestRecord& record = *requests_.at(s.request_id);
    RecordAdmission(s, record);
    if (!s.samples) continue;
    // One row per draft token too: row j predicts the token after the j-th scheduled draft.
    const int32_t rows = 1 + s.num_draft_tokens;
    for (int32_t j = 0; j < rows; ++j) {
      step.logits_indices.push_back(s.query_start + s.num_scheduled_tokens - rows + j);
      step.sampling.push_back(
          SamplingParams{.temperature = record.sampling.temperature,
                         .top_p = record.sampling.top_p,
                         .seed = record.sampling.seed,
                         .counter = static_cast<uint64_t>(record.num_generated + j)});
    }
    step.sampled_ids.push_back(s.request_id);
    step.sampled_seqs.push_back(i);
    step.row_start.push_back(step.row_start.back() + rows);
  }
  return step;
}

absl::Status Engine::RunModel(const StepBatch& step, std::vector<float>* logits,
                              std::vector<TokenId>* sampled) {
  // CacheBlend: the reused tokens scheduled in this batch are recomputed selectively.
  std::optional<CacheBlendHook> blend;
  if (internals_->reuse != nullptr && batch_.stats.num_blend_tokens > 0) {
    blend = internals_->reuse->MakeBlendHook(batch_);
  }
  const ModelInput input{.token_ids = batch_.token_ids,
                         .positions = batch_.positions,
                         .slot_mapping = batch_.slot_mapping,
                         .query_start_loc = batch_.query_start_loc,
                         .kv_lens = step.kv_lens,
                         .block_tables = step.tables,
                         .max_blocks_per_seq = step.max_blocks,
                         .logits_indices = step.logits_indices};
  ModelOutput model_out;
  PAGEDKV_RETURN_IF_ERROR(
      internals_->runner->Forward(input,
                                  {.return_logits = options_.return_logits,
                                   .sampling = step.sampling,
                                   .hook = blend.has_value() ? &*blend : nullptr},
                                  &model_out));
  const auto num_kept = blend.has_value() ? static_cast<int64_t>(blend->kept_rows().size()) : 0;
  stats_.num_blend_recomputed_tokens += num_kept;
  stats_.num_blend_partial_tokens += batch_.stats.num_blend_tokens - num_kept;
  if (options_.return_logits) *logits = std::move(model_out.logits);
  *sampled = std::move(model_out.sampled);
  return absl::OkStatus();
}

SampledToken Engine::VerifySampled(const StepBatch& step, size_t i,
                                   const std::vector<TokenId>& sampled) const {
  const int32_t first = step.row_start[i];
  const int32_t rows = step.row_start[i + 1] - first;
  const ScheduledSequence& s = batch_.sequences[static_cast<size_t>(step.sampled_seqs[i])];
  const std::span<const TokenId> argmax =
      std::span<const TokenId>(sampled).subspan(static_cast<size_t>(first), rows);
  const std::span<const TokenId> drafts =
      std::span<const TokenId>(batch_.token_ids)
          .subspan(static_cast<size_t>(s.query_start) + s.num_scheduled_tokens - (rows - 1),
                   rows - 1);
  const int32_t accepted = internal::NumAcceptedDrafts(drafts, argmax);
  return SampledToken{.request_id = step.sampled_ids[i],
                      .token = argmax[static_cast<size_t>(accepted)],
                      .num_accepted_draft_tokens = accepted};
}

absl::Status Engine::CollectOutputs(const StepBatch& step, const std::vector<TokenId>& sampled,
                                    StepOutput* out) {
  std::vector<SampledToken> tokens(step.sampled_ids.size());
  for (size_t i = 0; i < step.sampled_ids.size(); ++i) tokens[i] = VerifySampled(step, i, sampled);
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<RequestOutput> outputs,
                           scheduler_->UpdateFromOutput(tokens));
  // With drafts the model returned more rows than tokens; keep the rows of appended tokens.
  const bool remap_logits = options_.return_logits && batch_.stats.num_draft_tokens > 0;
  std::vector<float> logits;
  const size_t vocab = static_cast<size_t>(config().vocab_size);
  const Clock::time_point now = Clock::now();
  for (size_t k = 0; k < outputs.size(); ++k) {
    RequestOutput& o = outputs[k];
    auto it = requests_.find(o.request_id);
    RequestRecord& record = *it->second;
    if (record.num_generated == 0) {
      record.time_to_first_token_s = std::chrono::duration<double>(now - record.added).count();
    }
    if (remap_logits) {
      const auto row = out->logits.begin() + static_cast<ptrdiff_t>(step.row_start[k] * vocab);
      logits.insert(logits.end(), row, row + static_cast<ptrdiff_t>(o.new_tokens.size() * vocab));
    }
    for (const TokenId token : o.new_tokens) {
      out->tokens.push_back(
          TokenOutput{.request_id = o.request_id, .token = token, .index = record.num_generated});
      ++record.num_generated;
      record.context.push_back(token);
    }
    if (o.finished()) {
      out->finished.push_back(
          MakeResult(o.request_id, record, std::move(o.output_tokens), o.finish_reason));
      requests_.erase(it);
      ++stats_.num_finished;
    } else {
      PAGEDKV_RETURN_IF_ERROR(ProposeDrafts(o.request_id, record));
    }
  }
  if (remap_logits) out->logits = std::move(logits);
  return absl::OkStatus();
}

absl::Status Engine::ProposeDrafts(RequestId id, const RequestRecord& record) {
  const SpeculativeOptions& spec = options_.speculative;
  if (spec.num_speculative_tokens == 0 || !IsGreedyTemperature(record.sampling.temperature)) {
    return absl::OkStatus();
  }
  const std::vector<TokenId> drafts =
      internal::ProposeNgramDrafts(record.context, {.num_draft_tokens = spec.num_speculative_tokens,
                                                    .min_ngram = spec.prompt_lookup_min,
                                                    .max_ngram = spec.prompt_lookup_max});
  if (drafts.empty()) return absl::OkStatus();
  // Cannot fail: the request just sampled, so it is running in decode, and drafts are its tokens.
  return scheduler_->SetDraftTokens(id, drafts);
}

void Engine::RecordStepStats(int32_t num_seqs, StepOutput* out) {
  const int32_t num_tokens = batch_.num_tokens();
  ++stats_.num_steps;
  stats_.num_computed_tokens += num_tokens;
  stats_.num_generated_tokens += static_cast<int64_t>(out->tokens.size());
  stats_.num_preemptions += batch_.stats.num_preempted;
  stats_.num_draft_tokens = scheduler_->stats().num_draft_tokens;
  stats_.num_accepted_draft_tokens = scheduler_->stats().num_accepted_draft_tokens;
  if (stats_.step_num_tokens.size() < EngineStats::kMaxRecordedSteps) {
    stats_.step_num_tokens.push_back(num_tokens);
    stats_.step_num_seqs.push_back(num_seqs);
  }
  stats_.max_step_num_tokens = std::max(stats_.max_step_num_tokens, num_tokens);
  stats_.max_step_num_seqs = std::max(stats_.max_step_num_seqs, num_seqs);
  ++stats_.step_num_tokens_histogram[HistogramBucket(num_tokens)];
}

void Engine::MarkReusedChunk(const ScheduledSequence& s, RequestRecord& record) {
  // The reused tokens precede the step's tokens, or open them when they are blended.
  const int32_t first = s.num_blend_tokens > 0 ? s.num_computed_tokens
                                               : s.num_computed_tokens - s.num_shifted_hit_tokens;
  for (size_t c = 0; c < record.chunks.size(); ++c) {
    const PromptChunk& chunk = record.chunks[c];
    if (first >= chunk.offset && first < chunk.offset + chunk.length) record.chunk_reused[c] = 1;
  }
}

absl::Status Engine::RegisterChunks(int32_t i) {
  const ScheduledSequence& s = batch_.sequences[static_cast<size_t>(i)];
  const RequestRecord& record = *requests_.at(s.request_id);
  const std::span<const BlockId> table = batch_.BlockTable(i);
  const int64_t bs = batch_.block_size;
  for (size_t c = 0; c < record.chunks.size(); ++c) {
    const PromptChunk& chunk = record.chunks[c];
    const int32_t end = chunk.offset + chunk.length;
    if (record.chunk_reused[c] || end <= s.num_computed_tokens || end > s.seq_len()) continue;
    std::vector<int64_t> slots;
    slots.reserve(static_cast<size_t>(chunk.length));
    for (int32_t pos = chunk.offset; pos < end; ++pos) {
      slots.push_back(static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) * bs + pos % bs);
    }
    const auto tokens =
        std::span<const TokenId>(record.prompt)
            .subspan(static_cast<size_t>(chunk.offset), static_cast<size_t>(chunk.length));
    PAGEDKV_RETURN_IF_ERROR(internals_->reuse->Register(tokens, record.cache_salt, /*adapter_id=*/0,
                                                        chunk.offset, slots));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GenerationResult>> Engine::Generate(
    std::vector<GenerationRequest> requests) {
  std::vector<RequestId> ids;
  ids.reserve(requests.size());
  for (GenerationRequest& r : requests) {
    absl::StatusOr<RequestId> id = AddRequest(std::move(r));
    if (!id.ok()) {
      for (RequestId added : ids) {
        if (scheduler_->AbortRequest(added).ok()) {
          requests_.erase(added);
          --stats_.num_requests;
        }
      }
      return id.status();
    }
    ids.push_back(*id);
  }
  absl::flat_hash_map<RequestId, size_t> slot_of;
  for (size_t i = 0; i < ids.size(); ++i) slot_of[ids[i]] = i;
  std::vector<GenerationResult> results(ids.size());
  std::vector<GenerationResult> others;  // finished requests of other callers
  size_t remaining = ids.size();
  absl::Status status;
  while (remaining > 0 && status.ok()) {
    absl::StatusOr<StepOutput> step = Step();
    if (!step.ok()) {
      status = step.status();
      break;
    }
    for (GenerationResult& r : step->finished) {
      auto it = slot_of.find(r.request_id);
      if (it == slot_of.end()) {
        others.push_back(std::move(r));
        continue;
      }
      results[it->second] = std::move(r);
      --remaining;
    }
    if (remaining > 0 && step->batch.num_scheduled_tokens == 0 && step->finished.empty()) {
      status =
          absl::InternalError(absl::StrCat("Engine::Generate: the scheduler made no progress with ",
                                           remaining, " request(s) unfinished"));
    }
  }
  // Reported by the next Step(), after any a failed Step() left there.
  others.insert(others.end(), std::make_move_iterator(unclaimed_finished_.begin()),
                std::make_move_iterator(unclaimed_finished_.end()));
  unclaimed_finished_ = std::move(others);
  if (!status.ok()) return status;
  return results;
}

absl::Status Engine::AbortRequest(RequestId id) {
  if (!requests_.contains(id)) {
    return absl::NotFoundError(
        absl::StrCat("AbortRequest: unknown request ", id, " (never added, or already finished)"));
  }
  return scheduler_->AbortRequest(id);
}

}  // namespace pagedkv
