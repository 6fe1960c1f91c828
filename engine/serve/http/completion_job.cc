// Copyright 2026 The pagedkv Authors.
//
// CompletionJob (see completion_job.h).
#include "engine/serve/http/completion_job.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/serve/http/logprob_text.h"
#include "engine/serve/http/peer_socket.h"

namespace pagedkv::server {
namespace {

// What echo puts before the text: the prompt as sent, or its ids decoded.
std::string EchoText(const ApiRequest& api, const std::vector<TokenId>& prompt,
                     const Tokenizer& tokenizer) {
  if (!api.echo) return "";
  if (!api.prompt_is_tokens) return api.prompt_text;
  absl::StatusOr<std::string> text = tokenizer.Decode(prompt);
  return text.ok() ? *std::move(text) : std::string();
}

// How often a waiting job looks at the client's socket between tokens.
constexpr absl::Duration kPollInterval = absl::Milliseconds(25);

}  // namespace

CompletionJob::CompletionJob(EngineLoop* loop, std::shared_ptr<RequestChannel> channel,
                             const ApiRequest& api, ResponseMeta meta, const Tokenizer& tokenizer,
                             TokenId prev, int peer_fd, int32_t index)
    : loop_(loop),
      channel_(std::move(channel)),
      meta_(std::move(meta)),
      include_usage_(api.include_usage),
      stop_token_ids_(api.stop_token_ids),
      text_(tokenizer, prev, api.stop),
      texts_(tokenizer),
      prev_(prev),
      want_logprobs_(api.logprobs >= 0),
      echo_(api.echo),
      logprobs_k_(api.logprobs),
      prompt_logprobs_k_(api.prompt_logprobs),
      drop_generated_(api.max_tokens == 0),
      echo_text_(EchoText(api, meta_.prompt_token_ids, tokenizer)),
      peer_fd_(peer_fd),
      index_(index),
      poll_interval_(kPollInterval / std::max(1, api.n)) {
  text_.set_min_tokens(api.min_tokens);
}

CompletionJob::~CompletionJob() {
  if (!ended_) loop_->Abort(channel_->id(), EngineLoop::AbortReason::kClientGone);
}

bool CompletionJob::Next(RequestChannel::Update* update) {
  *update = channel_->Wait(poll_interval_);
  if (update->prompt_logprobs.has_value()) prompt_logprobs_ = std::move(update->prompt_logprobs);
  if (want_logprobs_) AddLogprobs(update->tokens, update->logprobs);
  for (TokenId t : update->tokens) {
    tokens_.push_back(t);
    // The engine samples inside the vocabulary, so decoding cannot fail; a token that did would
    // only be missing from the text.
    text_.Add(t).IgnoreError();
  }
  if (text_.stopped() && !stop_sent_) {
    loop_->Abort(channel_->id(), EngineLoop::AbortReason::kStopString);
    stop_sent_ = true;
  }
  if (update->result.has_value()) {
    ended_ = true;
    text_.Finish();
    // Ended before its first token (aborted): what the prompt got so far.
    if (!prompt_logprobs_.has_value()) prompt_logprobs_ = update->result->prompt_logprobs;
    return true;
  }
  return peer_fd_ < 0 || !PeerHasClosed(peer_fd_);
}

void CompletionJob::AddLogprobs(const std::vector<TokenId>& tokens,
                                const std::vector<TokenLogprobs>& logprobs) {
  std::vector<TokenLogprobText> entries =
      texts_.Generated(tokens_.empty() ? prev_ : tokens_.back(), tokens, logprobs, &text_offset_);
  logprobs_.insert(logprobs_.end(), std::make_move_iterator(entries.begin()),
                   std::make_move_iterator(entries.end()));
}

void CompletionJob::AddPromptParts(ChoiceDelta* choice) {
  const std::vector<TokenId>& prompt = meta_.prompt_token_ids;
  const std::vector<TokenLogprobs> none;
  const std::vector<TokenLogprobs>& logprobs =
      prompt_logprobs_.has_value() ? *prompt_logprobs_ : none;
  // A chat response carries vLLM's prompt_logprobs once, beside its choices: choice 0's.
  const bool chat = meta_.endpoint == ApiEndpoint::kChatCompletions;
  if (prompt_logprobs_k_ >= 0 && (!chat || index_ == 0)) {
    choice->prompt_logprobs = texts_.Vllm(prompt, logprobs, prompt_logprobs_k_);
  }
  if (!echo_) return;
  choice->text = echo_text_ + choice->text;
  if (!choice->logprobs.has_value()) return;
  std::vector<TokenLogprobText> entries =
      texts_.Prompt(prompt, logprobs, logprobs_k_, &echo_offset_);
  for (TokenLogprobText& e : *choice->logprobs) {
    e.text_offset += echo_offset_;  // past the prompt's entries
    entries.push_back(std::move(e));
  }
  choice->logprobs = std::move(entries);
}

std::optional<std::vector<TokenLogprobText>> CompletionJob::LogprobsOf(size_t from,
                                                                       size_t to) const {
  if (!want_logprobs_) return std::nullopt;
  to = std::min(to, logprobs_.size());
  from = std::min(from, to);
  std::vector<TokenLogprobText> entries(logprobs_.begin() + static_cast<ptrdiff_t>(from),
                                        logprobs_.begin() + static_cast<ptrdiff_t>(to));
  for (TokenLogprobText& e : entries) e.text_offset += echo_offset_;
  return entries;
}

ChoiceDelta CompletionJob::FinalChoice(const GenerationResult& result) const {
  if (drop_generated_) return {.finish_reason = "length"};
  ChoiceDelta c;
  if (text_.stopped()) {
    c.finish_reason = "stop";
    c.stop_string = text_.stop_string();
    return c;
  }
  switch (result.finish_reason) {
    case FinishReason::kStop:
      c.finish_reason = "stop";
      if (!tokens_.empty() && std::find(stop_token_ids_.begin(), stop_token_ids_.end(),
                                        tokens_.back()) != stop_token_ids_.end()) {
        c.stop_token = tokens_.back();
      }
      break;
    case FinishReason::kLength:
      c.finish_reason = "length";
      break;
    default:
      c.finish_reason = "abort";
  }
  return c;
}

Usage CompletionJob::UsageOf(const GenerationResult& result) const {
  return {.prompt_tokens = static_cast<int64_t>(meta_.prompt_token_ids.size()),
          .completion_tokens = static_cast<int64_t>(Counted()),
          .cached_tokens = result.num_prefix_hit_tokens};
}

int CompletionJob::Finish(ChoiceDelta* choice, Usage* usage, std::string* error_body) {
  RequestChannel::Update update;
  while (!ended_) {
    if (!Next(&update)) return 0;
  }
  if (!update.status.ok()) {
    *error_body = ErrorBody(500, update.status.message());
    return 500;
  }
  *choice = FinalChoice(*update.result);
  choice->index = index_;
  *usage = UsageOf(*update.result);
  choice->text = drop_generated_ ? std::string() : text_.text();
  choice->token_ids.assign(tokens_.begin(), tokens_.begin() + static_cast<ptrdiff_t>(Counted()));
  choice->logprobs = LogprobsOf(0, Counted());
  AddPromptParts(choice);
  return 200;
}

int CompletionJob::RunWhole(std::string* body) {
  ChoiceDelta choice;
  Usage usage;
  const int status = Finish(&choice, &usage, body);
  if (status == 200) *body = CompletionBody(meta_, choice, usage);
  return status;
}

size_t CompletionJob::Counted() const {
  if (drop_generated_) return 0;
  return text_.stopped() ? static_cast<size_t>(text_.num_tokens()) : tokens_.size();
}

ChoiceDelta CompletionJob::TakeDelta(ChoiceDelta delta) {
  delta.index = index_;
  delta.first = !sent_first_;
  delta.text = drop_generated_ ? std::string() : text_.TakeDelta();
  delta.token_ids.assign(tokens_.begin() + static_cast<ptrdiff_t>(sent_tokens_),
                         tokens_.begin() + static_cast<ptrdiff_t>(Counted()));
  delta.logprobs = LogprobsOf(sent_tokens_, Counted());
  if (!sent_first_) AddPromptParts(&delta);  // the echo and prompt logprobs lead the stream
  sent_first_ = true;
  sent_tokens_ = Counted();
  return delta;
}

bool CompletionJob::StreamStep(const Writer& write) {
  RequestChannel::Update update;
  if (!Next(&update)) return false;
  if (!ended_) {
    return Counted() == sent_tokens_ || write(SseEvent(StreamChunk(meta_, TakeDelta({}))));
  }
  stream_done_ = true;
  if (!update.status.ok()) {
    stream_error_ = update.status;
    return true;
  }
  usage_ = UsageOf(*update.result);
  return write(SseEvent(StreamChunk(meta_, TakeDelta(FinalChoice(*update.result)))));
}

bool CompletionJob::Stream(const Writer& write) {
  std::vector<CompletionJob*> one = {this};
  return StreamChoices(one, include_usage_, write);
}

bool StreamChoices(const std::vector<CompletionJob*>& jobs, bool include_usage,
                   const CompletionJob::Writer& write) {
  for (bool running = true; running;) {
    running = false;
    for (CompletionJob* job : jobs) {
      if (job->stream_done()) continue;
      if (!job->StreamStep(write)) return false;
      if (!job->stream_error().ok()) {
        return write(SseEvent(ErrorBody(500, job->stream_error().message()))) && write(kSseDone);
      }
      running = running || !job->stream_done();
    }
  }
  Usage total = jobs.front()->usage();  // the prompt once, every choice's completion tokens
  for (size_t i = 1; i < jobs.size(); ++i)
    total.completion_tokens += jobs[i]->usage().completion_tokens;
  if (include_usage && !write(SseEvent(UsageChunk(jobs.front()->meta(), total)))) return false;
  return write(kSseDone);
}

}  // namespace pagedkv::server
