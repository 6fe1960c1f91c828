// Copyright 2026 The pagedkv Authors.
//
// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical ordering of
// combining marks, canonical composition (Hangul algorithmically). Tables are generated from
// Python's unicodedata (scripts/gen_unicode_nfc.py; Unicode 14). Used by the tokenizer.json
// "NFC" normalizer (Qwen2).
//
// Example:
//   NfcNormalize("e\xCC\x81");  // "é" (U+0065 U+0301 -> U+00E9)
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_NFC_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_NFC_H_

#include <string>
#include <string_view>

#include "pagedkv/export.h"

namespace pagedkv::model_internal {

// The NFC form of `text` (UTF-8; invalid sequences become U+FFFD first). Linear in the length
// (times the longest run of combining marks, for the ordering).
PAGEDKV_EXPORT std::string NfcNormalize(std::string_view text);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_NFC_H_
