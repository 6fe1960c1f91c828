// Copyright 2026 The pagedkv Authors.
//
// TextStream (see text_stream.h).
#include "engine/serve/http/text_stream.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::server {
namespace {

// Bytes of the UTF-8 sequence that `lead` starts; 0 for a continuation byte.
size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC0) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// `end`, moved back before a UTF-8 sequence that starts in text[.., end) and is not complete.
size_t BeforeSplitSequence(const std::string& text, size_t end) {
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    const size_t len = SequenceLength(static_cast<unsigned char>(text[end - back]));
    if (len == 0) continue;
    return len > back ? end - back : end;
  }
  return end;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, TokenId prev, std::vector<std::string> stop)
    : tokenizer_(tokenizer), prev_(prev), stop_(std::move(stop)) {
  for (const std::string& s : stop_) max_stop_bytes_ = std::max(max_stop_bytes_, s.size());
}

absl::Status TextStream::Add(TokenId token) {
  if (stopped()) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(std::string piece, tokenizer_.DecodeToken(prev_, token));
  prev_ = token;
  ++num_tokens_;
  const size_t from = text_.size();
  text_ += piece;
  if (num_tokens_ > min_tokens_) FindStop(from);
  return absl::OkStatus();
}

void TextStream::FindStop(size_t from) {
  size_t best = std::string::npos;
  for (size_t i = 0; i < stop_.size(); ++i) {
    // A match ending in the new bytes starts at most |stop| - 1 bytes before them.
    const size_t start = from >= stop_[i].size() - 1 ? from - (stop_[i].size() - 1) : 0;
    const size_t at = text_.find(stop_[i], start);
    if (at != std::string::npos && at < best) {
      best = at;
      stop_index_ = static_cast<int>(i);
    }
  }
  if (best != std::string::npos) text_.resize(best);
}

size_t TextStream::SendableEnd() const {
  if (finished_ || stopped()) return text_.size();
  const size_t hold = max_stop_bytes_ > 0 ? max_stop_bytes_ - 1 : 0;
  const size_t end = text_.size() > hold ? text_.size() - hold : 0;
  return BeforeSplitSequence(text_, std::max(end, sent_));
}

std::string TextStream::TakeDelta() {
  const size_t end = std::max(SendableEnd(), sent_);
  std::string delta = text_.substr(sent_, end - sent_);
  sent_ = end;
  return delta;
}

}  // namespace pagedkv::server
