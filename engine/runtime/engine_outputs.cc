// Copyright 2026 The pagedkv Authors.
//
// Engine output handling: the sampled tokens of a step verified against the drafts and fed to the
// scheduler (CollectOutputs), new drafts proposed (ProposeDrafts), and the results of finished and
// aborted requests (MakeResult, ReportAborted).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/ngram_proposer.h"
#include "engine/runtime/step_batch.h"
#include "engine/runtime/token_logprobs.h"
#include "kernels/sample_math.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Copied logits row `copied` of `model_out` (ForwardOptions::copy_rows order).
absl::Span<const float> CopiedRow(const ModelOutput& model_out, int32_t copied, int32_t vocab) {
  const auto width = static_cast<size_t>(vocab);
  return {model_out.row_logits.data() + static_cast<size_t>(copied) * width, width};
}

}  // namespace

GenerationResult Engine::MakeResult(RequestId id, const RequestRecord& record,
                                    std::vector<TokenId> output_tokens, FinishReason reason) const {
  GenerationResult result;
  result.request_id = id;
  result.prompt_tokens = record.prompt;
  result.output_tokens = std::move(output_tokens);
  result.finish_reason = reason;
  result.prompt_logprobs = record.prompt_logprobs;
  result.num_prefix_hit_tokens = record.num_prefix_hit_tokens;
  result.num_host_hit_tokens = record.num_host_hit_tokens;
  result.num_remote_hit_tokens = record.num_remote_hit_tokens;
  result.num_disk_hit_tokens = record.num_disk_hit_tokens;
  result.num_device_hit_tokens = record.num_prefix_hit_tokens - record.num_host_hit_tokens -
                                 record.num_disk_hit_tokens - record.num_remote_hit_tokens;
  result.num_readmission_hit_tokens = record.num_readmission_hit_tokens;
  result.num_readmission_host_hit_tokens = record.num_readmission_host_hit_tokens;
  result.num_readmission_remote_hit_tokens = record.num_readmission_remote_hit_tokens;
  result.num_readmission_disk_hit_tokens = record.num_readmission_disk_hit_tokens;
  result.num_readmission_device_hit_tokens =
      record.num_readmission_hit_tokens - record.num_readmission_host_hit_tokens -
      record.num_readmission_disk_hit_tokens - record.num_readmission_remote_hit_tokens;
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

TokenLogprobs Engine::LogprobsOf(const StepBatch& step, const ModelOutput& model_out, size_t k,
                                 int32_t j, TokenId token, int32_t top_k) const {
  const int32_t copied = step.copied_index[static_cast<size_t>(step.row_start[k] + j)];
  return TokenLogprobsOf(CopiedRow(model_out, copied, config().vocab_size), token, top_k);
}

void Engine::CollectPromptLogprobs(const StepBatch& step, const ModelOutput& model_out) {
  for (const StepBatch::PromptRow& r : step.prompt_rows) {
    RequestRecord& record = *requests_.at(r.request_id);
    if (static_cast<size_t>(r.position) != record.prompt_logprobs.size()) continue;
    record.prompt_logprobs.push_back(TokenLogprobsOf(
        CopiedRow(model_out, r.copied, config().vocab_size),
        record.prompt[static_cast<size_t>(r.position) + 1], record.sampling.prompt_logprobs));
  }
}

absl::Status Engine::CollectOutputs(const StepBatch& step, const ModelOutput& model_out,
                                    StepOutput* out) {
  CollectPromptLogprobs(step, model_out);
  std::vector<SampledToken> tokens(step.sampled_ids.size());
  for (size_t i = 0; i < step.sampled_ids.size(); ++i) {
    tokens[i] = VerifySampled(step, i, model_out.sampled);
  }
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
    for (size_t j = 0; j < o.new_tokens.size(); ++j) {
      const TokenId token = o.new_tokens[j];
      TokenOutput& t = out->tokens.emplace_back();
      t.request_id = o.request_id;
      t.token = token;
      t.index = record.num_generated;
      if (record.sampling.logprobs >= 0) {
        t.logprobs = LogprobsOf(step, model_out, k, static_cast<int32_t>(j), token,
                                record.sampling.logprobs);
      }
      // The prompt is computed before its first token is sampled, so its logprobs are complete.
      if (t.index == 0 && record.sampling.prompt_logprobs >= 0) {
        t.prompt_logprobs = record.prompt_logprobs;
      }
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

}  // namespace pagedkv
