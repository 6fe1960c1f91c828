// Copyright 2026 The pagedkv Authors.
//
// Unicode normalization forms (UAX #15): canonical (NFC, NFD) or compatibility (NFKC, NFKD)
// decomposition, canonical ordering of combining marks, and for NFC / NFKC canonical composition
// (Hangul algorithmically). Tables are generated from Python's unicodedata
// (scripts/gen_unicode_nfc.py; Unicode 14). Used by the tokenizer.json normalizers NFC (Qwen2),
// NFD, NFKC and NFKD.
//
// Example:
//   NfcNormalize("e\xCC\x81");                           // "é" (U+0065 U+0301 -> U+00E9)
//   UnicodeNormalize("\xEF\xAC\x81", NormalForm::kNfkc);  // "fi" (the ligature U+FB01)
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_NFC_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_NFC_H_

#include <string>
#include <string_view>

#include "pagedkv/export.h"

namespace pagedkv::model_internal {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// `text` in `form` (UTF-8; invalid sequences become U+FFFD first). Linear in the length (times the
// longest run of combining marks, for the ordering).
PAGEDKV_EXPORT std::string UnicodeNormalize(std::string_view text, NormalForm form);

// The NFC form of `text` (UTF-8; invalid sequences become U+FFFD first). Linear in the length
// (times the longest run of combining marks, for the ordering).
PAGEDKV_EXPORT std::string NfcNormalize(std::string_view text);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_NFC_H_
