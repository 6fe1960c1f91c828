// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: tokenizer.json and encoding. Input layout: the JSON text, the separator
// "\xff\xfe", then a text to encode. A tokenizer that builds must encode any text into ids inside
// its vocabulary and decode them back without error.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/model/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t separator = input.find("\xff\xfe");
  const std::string json(input.substr(0, separator));
  const std::string_view text =
      separator == std::string_view::npos ? std::string_view() : input.substr(separator + 2);
  auto spec = pagedkv::ParseHfTokenizerJson(json, "fuzz");
  if (!spec.ok()) return 0;
  auto tokenizer = pagedkv::BpeTokenizer::Create(*spec);
  if (!tokenizer.ok()) return 0;
  const std::vector<pagedkv::TokenId> ids = tokenizer->Encode(text, /*add_special_tokens=*/true);
  for (pagedkv::TokenId id : ids) {
    if (id < 0 || id >= tokenizer->vocab_size()) std::abort();
  }
  if (!tokenizer->Decode(ids, /*at_start=*/true, /*replace_invalid_utf8=*/true).ok()) std::abort();
  return 0;
}
