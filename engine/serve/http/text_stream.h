// Copyright 2026 The pagedkv Authors.
//
// TextStream: a request's output text, token by token, as a client may see it while it streams:
// the tokens' text (Tokenizer::DecodeToken, each with its predecessor, so the whole equals
// Tokenizer::Decode of the output), cut at the first stop string (the stop string itself is not
// part of the text, as in OpenAI and vLLM). A delta never ends inside a UTF-8 sequence, and while
// the request may still run it holds back the last (longest stop string - 1) bytes, which a later
// token could complete into a stop string (vLLM's stop buffer). Finish() releases the rest.
//
// Example:
//   TextStream text(tokenizer, /*prev=*/prompt.back(), {"\n\n"});
//   for (TokenId t : new_tokens) PAGEDKV_RETURN_IF_ERROR(text.Add(t));
//   Send(text.TakeDelta());
//   if (text.stopped()) Abort();  // the stop string was hit: the engine can stop
//
// Not thread-safe: one HTTP thread owns a request's stream.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_TEXT_STREAM_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_TEXT_STREAM_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/types.h"

namespace pagedkv::server {

class TextStream {
 public:
  // REQUIRES: `tokenizer` outlives the stream; stop strings are non-empty.
  TextStream(const Tokenizer& tokenizer, TokenId prev, std::vector<std::string> stop);

  // Appends `token`'s text. After a stop string was found further tokens are ignored.
  // InvalidArgument for an id outside the vocabulary.
  absl::Status Add(TokenId token);
  // vLLM's min_tokens: stop strings are looked for only in tokens after the first `n` (a stop
  // string may still start in their text).
  void set_min_tokens(int32_t n) { min_tokens_ = n; }
  // No more tokens: everything not yet taken may be released.
  void Finish() { finished_ = true; }

  // The text that may be sent now and was not sent before.
  std::string TakeDelta();

  bool stopped() const { return stop_index_ >= 0; }
  // The stop string found (REQUIRES: stopped()).
  const std::string& stop_string() const { return stop_[static_cast<size_t>(stop_index_)]; }
  // The whole text so far (up to the stop string once stopped).
  const std::string& text() const { return text_; }
  // Tokens added before the stop string was found (all of them otherwise).
  int32_t num_tokens() const { return num_tokens_; }

 private:
  // Looks for a stop string that ends in the bytes appended since `from`.
  void FindStop(size_t from);
  // The end of what may be sent: no held-back bytes, no split UTF-8 sequence.
  size_t SendableEnd() const;

  const Tokenizer& tokenizer_;
  TokenId prev_;
  std::vector<std::string> stop_;
  size_t max_stop_bytes_ = 0;
  std::string text_;
  size_t sent_ = 0;
  int stop_index_ = -1;
  int32_t num_tokens_ = 0;
  int32_t min_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_TEXT_STREAM_H_
