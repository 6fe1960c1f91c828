// Copyright 2026 The pagedkv Authors.
//
// CompletionJob (see completion_job.h).
#include "engine/serve/http/completion_job.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "engine/serve/http/peer_socket.h"

namespace pagedkv::server {
namespace {

// How often a waiting job looks at the client's socket between tokens.
constexpr absl::Duration kPollInterval = absl::Milliseconds(25);

}  // namespace

CompletionJob::CompletionJob(EngineLoop* loop, std::shared_ptr<RequestChannel> channel,
                             const ApiRequest& api, ResponseMeta meta, const Tokenizer& tokenizer,
                             TokenId prev, int peer_fd)
    : loop_(loop),
      channel_(std::move(channel)),
      meta_(std::move(meta)),
      include_usage_(api.include_usage),
      stop_token_ids_(api.stop_token_ids),
      text_(tokenizer, prev, api.stop),
      peer_fd_(peer_fd) {}

CompletionJob::~CompletionJob() {
  if (!ended_) loop_->Abort(channel_->id(), EngineLoop::AbortReason::kClientGone);
}

bool CompletionJob::Next(RequestChannel::Update* update) {
  *update = channel_->Wait(kPollInterval);
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
    return true;
  }
  return peer_fd_ < 0 || !PeerHasClosed(peer_fd_);
}

ChoiceDelta CompletionJob::FinalChoice(const GenerationResult& result) const {
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
          .completion_tokens =
              text_.stopped() ? text_.num_tokens() : static_cast<int64_t>(tokens_.size()),
          .cached_tokens = result.num_prefix_hit_tokens};
}

int CompletionJob::RunWhole(std::string* body) {
  RequestChannel::Update update;
  while (!ended_) {
    if (!Next(&update)) return 0;
  }
  if (!update.status.ok()) {
    *body = ErrorBody(500, update.status.message());
    return 500;
  }
  ChoiceDelta choice = FinalChoice(*update.result);
  choice.text = text_.text();
  const Usage usage = UsageOf(*update.result);
  choice.token_ids.assign(tokens_.begin(), tokens_.begin() + usage.completion_tokens);
  *body = CompletionBody(meta_, choice, usage);
  return 200;
}

bool CompletionJob::Stream(const Writer& write) {
  bool first = true;
  size_t sent_tokens = 0;
  auto counted = [this] {
    return text_.stopped() ? static_cast<size_t>(text_.num_tokens()) : tokens_.size();
  };
  RequestChannel::Update update;
  for (;;) {
    if (!Next(&update)) return false;
    if (ended_) break;
    if (counted() == sent_tokens) continue;
    ChoiceDelta delta = {.text = text_.TakeDelta(), .first = first};
    delta.token_ids.assign(tokens_.begin() + sent_tokens, tokens_.begin() + counted());
    if (!write(SseEvent(StreamChunk(meta_, delta)))) return false;
    first = false;
    sent_tokens = counted();
  }
  if (!update.status.ok()) {
    return write(SseEvent(ErrorBody(500, update.status.message()))) && write(kSseDone);
  }
  ChoiceDelta last = FinalChoice(*update.result);
  last.text = text_.TakeDelta();
  last.first = first;
  last.token_ids.assign(tokens_.begin() + sent_tokens, tokens_.begin() + counted());
  if (!write(SseEvent(StreamChunk(meta_, last)))) return false;
  if (include_usage_ && !write(SseEvent(UsageChunk(meta_, UsageOf(*update.result))))) {
    return false;
  }
  return write(kSseDone);
}

}  // namespace pagedkv::server
