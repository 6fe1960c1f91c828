// Copyright 2026 The pagedkv Authors.
//
// CompletionJob: one accepted completion or chat request on its HTTP thread, from the engine's
// tokens to the response: the whole body (RunWhole), or Server-Sent Events written as tokens
// arrive (Pump, from cpp-httplib's chunked content provider). It polls the client's socket
// between tokens, and aborts the engine request (its blocks freed before the next step) when the
// client has gone, when a write fails, or when a stop string ends the text. What echo and
// prompt_logprobs add (the prompt's text, logprob entries and vLLM's prompt_logprobs) leads the
// choice: its body, or its first chunk (sent with the first token, as vLLM does).
//
// Example:
//   auto job = std::make_shared<CompletionJob>(loop, channel, api, meta, tokenizer, fd);
//   if (!api.stream) { res.status = job->RunWhole(&body); }
//   else res.set_chunked_content_provider("text/event-stream",
//            [job](size_t, httplib::DataSink& sink) { return job->Pump(sink); });
//
// Not thread-safe: one HTTP thread drives a job.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_COMPLETION_JOB_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_COMPLETION_JOB_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/serve/http/engine_loop.h"
#include "engine/serve/http/logprob_text.h"
#include "engine/serve/http/openai_request.h"
#include "engine/serve/http/openai_response.h"
#include "engine/serve/http/text_stream.h"

namespace pagedkv::server {

class CompletionJob {
 public:
  // `writer` sends bytes to the client (false: the connection failed).
  using Writer = std::function<bool(absl::string_view)>;

  // REQUIRES: `loop` and `tokenizer` outlive the job; `peer_fd` is the client's socket or -1;
  // `index` is the choice's (0 .. api.n - 1).
  CompletionJob(EngineLoop* loop, std::shared_ptr<RequestChannel> channel, const ApiRequest& api,
                ResponseMeta meta, const Tokenizer& tokenizer, TokenId prev, int peer_fd,
                int32_t index = 0);
  ~CompletionJob();  // aborts the request when it has not ended (e.g. the stream broke)

  // Waits for the end and writes the JSON body to *body; returns the HTTP status (200, or 500
  // when the engine failed; 0 when the client disconnected: nothing to send).
  int RunWhole(std::string* body);
  // The same, as this choice and its usage (200), or the error body (500), or 0.
  int Finish(ChoiceDelta* choice, Usage* usage, std::string* error_body);

  // Streams the whole response through `write` (chunks, the usage chunk when asked, [DONE]).
  // False when the client went away or a write failed (the request is aborted then).
  bool Stream(const Writer& write);

  // One step of a stream: waits for the next update and writes this choice's chunk, or its last
  // chunk once the request ended (then stream_done(); an engine failure is left in
  // stream_error() unwritten). False when the client went away or a write failed.
  bool StreamStep(const Writer& write);
  bool stream_done() const { return stream_done_; }
  const absl::Status& stream_error() const { return stream_error_; }
  const Usage& usage() const { return usage_; }  // once stream_done()
  const ResponseMeta& meta() const { return meta_; }

 private:
  // Waits for the next update and feeds its tokens to the text. False when the client is gone.
  bool Next(RequestChannel::Update* update);
  // Turns the logprobs of `tokens`, about to be appended to tokens_, into text entries.
  void AddLogprobs(const std::vector<TokenId>& tokens, const std::vector<TokenLogprobs>& logprobs);
  // The logprob entries of tokens [from, to) when the request asked for them, else none.
  std::optional<std::vector<TokenLogprobText>> LogprobsOf(size_t from, size_t to) const;
  // Puts what echo shows (the prompt's text and logprob entries) before the generated part
  // `choice` holds, and vLLM's prompt_logprobs in it; from then on the generated entries' text
  // offsets start past the prompt's (echo_offset_). Once per choice: its body or first chunk.
  void AddPromptParts(ChoiceDelta* choice);
  ChoiceDelta FinalChoice(const GenerationResult& result) const;
  // Tokens that count (those before a stop string; none with max_tokens 0).
  size_t Counted() const;
  // `delta` with the text, ids and logprobs not yet streamed, which are then marked sent.
  ChoiceDelta TakeDelta(ChoiceDelta delta);
  Usage UsageOf(const GenerationResult& result) const;

  EngineLoop* loop_;
  std::shared_ptr<RequestChannel> channel_;
  ResponseMeta meta_;
  bool include_usage_;
  std::vector<TokenId> stop_token_ids_;
  TextStream text_;
  std::vector<TokenId> tokens_;  // every token the engine produced (text_ may stop earlier)
  LogprobTexts texts_;
  TokenId prev_;  // the token before the first generated one (the prompt's last)
  bool want_logprobs_;
  bool echo_;
  int32_t logprobs_k_;         // top tokens per logprob entry
  int32_t prompt_logprobs_k_;  // vLLM's prompt_logprobs; -1: none
  bool drop_generated_;        // max_tokens 0 with echo: the generated token is left out
  std::string echo_text_;      // what echo puts before the text
  std::vector<TokenLogprobText> logprobs_;  // one per token of tokens_ with want_logprobs_
  int64_t text_offset_ = 0;                 // code points of the logprob entries' texts so far
  // The prompt's logprobs once the engine sent them (with the first token, or in the result).
  std::optional<std::vector<TokenLogprobs>> prompt_logprobs_;
  int64_t echo_offset_ = 0;  // echo: the generated entries' text offsets start here
  int peer_fd_;
  int32_t index_;
  absl::Duration poll_interval_;  // shared by the choices of one response
  bool ended_ = false;            // the channel delivered the result
  bool stop_sent_ = false;        // aborted for a stop string
  // Streaming state.
  bool sent_first_ = false;
  size_t sent_tokens_ = 0;
  bool stream_done_ = false;
  absl::Status stream_error_;
  Usage usage_;
};

// Streams the choices of one response, interleaved as their tokens arrive (each chunk carries
// its choice's index), then one usage chunk (the prompt once, every choice's completion tokens)
// when asked, then [DONE]. False when the client went away or a write failed.
bool StreamChoices(const std::vector<CompletionJob*>& jobs, bool include_usage,
                   const CompletionJob::Writer& write);

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_COMPLETION_JOB_H_
