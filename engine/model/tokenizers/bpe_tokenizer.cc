// Copyright 2026 The pagedkv Authors.
//
// BpeTokenizer: added tokens, normalizer, pre-tokenizer, BPE model, post-processor and decoder
// of the two Hugging Face BPE families (pagedkv/model/bpe_tokenizer.h).
#include "pagedkv/model/bpe_tokenizer.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "engine/model/tokenizers/added_tokens.h"
#include "engine/model/tokenizers/bpe_model.h"
#include "engine/model/tokenizers/byte_level.h"
#include "engine/model/tokenizers/pipeline.h"
#include "engine/model/tokenizers/unicode_categories.h"
#include "engine/model/tokenizers/unicode_nfc.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using model_internal::AddedPattern;
using model_internal::AddedTokenMatcher;
using model_internal::BpeModel;
using model_internal::TextPiece;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // "▁" (U+2581)

// Byte of a "<0xNN>" byte-fallback token, or -1.
int FallbackByte(std::string_view t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// `s` with every `from` replaced by `to`. REQUIRES: !from.empty().
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i).starts_with(from)) {
      out.append(to);
      i += from.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

}  // namespace

struct BpeTokenizer::Impl {
  BpeTokenizerSpec spec;  // vocab, merges and added tokens cleared after Create
  std::optional<BpeModel> model;
  model_internal::Pipeline pipeline;  // the generic normalizers and pre-tokenizers, if any
  std::vector<std::string> tokens;    // by id
  std::vector<bool> special;          // by id
  // What Decode reads for an id: tokens[id], or the normalized content of a normalized added
  // token (tokenizers' id_to_token gives that form; token() keeps the content, the token's name).
  absl::flat_hash_map<TokenId, std::string> decoded_as;
  const std::string& DecodeString(TokenId id) const {
    const auto it = decoded_as.find(id);
    return it != decoded_as.end() ? it->second : tokens[static_cast<size_t>(id)];
  }
  AddedTokenMatcher raw_added, normalized_added;

  // *lead_kept: see Pipeline::Normalize.
  std::string Normalize(std::string_view segment, bool* lead_kept = nullptr) const;
  // `at_start`: the segment begins the text (Metaspace's "first" scheme).
  void EncodeSegment(std::string_view normalized, bool at_start, std::vector<TokenId>* out) const;
  void EncodeMetaspace(std::string_view segment, bool at_start, std::vector<TokenId>* out) const;
  void AppendDecoded(std::string_view token, bool replace_invalid, std::string* bytes,
                     std::string* out) const;
  std::string JoinTokens(absl::Span<const TokenId> ids, bool at_start) const;
};

std::string BpeTokenizer::Impl::Normalize(std::string_view segment, bool* lead_kept) const {
  if (pipeline.has_normalizers()) return pipeline.Normalize(segment, lead_kept);
  if (lead_kept != nullptr) *lead_kept = true;
  const std::string nfc = spec.nfc ? model_internal::NfcNormalize(segment) : std::string();
  if (spec.nfc) segment = nfc;
  if (spec.family != BpeFamily::kSentencePiece || segment.empty()) return std::string(segment);
  std::string s = spec.prepend_space_marker ? std::string(kSpaceMarker) + std::string(segment)
                                            : std::string(segment);
  if (spec.replace_spaces) s = ReplaceAll(s, " ", kSpaceMarker);
  return s;
}

void BpeTokenizer::Impl::EncodeMetaspace(std::string_view segment, bool at_start,
                                         std::vector<TokenId>* out) const {
  std::string s = ReplaceAll(segment, " ", kSpaceMarker);
  const bool prepend = spec.metaspace == MetaspaceMode::kAlways ||
                       (spec.metaspace == MetaspaceMode::kFirst && at_start);
  if (prepend && !std::string_view(s).starts_with(kSpaceMarker)) {
    std::string t;
    t.reserve(s.size() + kSpaceMarker.size());
    t.append(kSpaceMarker.data(), kSpaceMarker.size());
    t.append(s);
    s = std::move(t);
  }
  if (!spec.metaspace_split) {
    model->EncodeWord(s, out);
    return;
  }
  size_t begin = 0;  // split before every "▁" (the marker starts the next word)
  for (size_t i = 1; i <= s.size(); ++i) {
    if (i == s.size() || std::string_view(s).substr(i).starts_with(kSpaceMarker)) {
      model->EncodeWord(std::string_view(s).substr(begin, i - begin), out);
      begin = i;
    }
  }
}

void BpeTokenizer::Impl::EncodeSegment(std::string_view normalized, bool at_start,
                                       std::vector<TokenId>* out) const {
  if (pipeline.has_pre_tokenizers()) {
    for (const std::string& word : pipeline.PreTokenize(normalized, at_start)) {
      model->EncodeWord(word, out);
    }
    return;
  }
  if (spec.family == BpeFamily::kSentencePiece) {
    if (spec.metaspace != MetaspaceMode::kOff) return EncodeMetaspace(normalized, at_start, out);
    model->EncodeWord(normalized, out);
    return;
  }
  const bool prefix = spec.add_prefix_space && !normalized.empty() && normalized[0] != ' ';
  std::string text;
  text.reserve(normalized.size() + 1);
  if (prefix) text.push_back(' ');
  text.append(normalized.data(), normalized.size());
  for (std::string_view piece : model_internal::SplitByteLevel(text, spec.split)) {
    model->EncodeWord(model_internal::ToByteLevelAlphabet(piece), out);
  }
}

absl::StatusOr<BpeTokenizer> BpeTokenizer::Create(const BpeTokenizerSpec& spec) {
  auto impl = std::make_unique<Impl>();
  TokenId max_id = -1;
  absl::flat_hash_map<std::string, TokenId> vocab;
  for (const auto& [token, id] : spec.vocab) {
    if (id < 0)
      return absl::InvalidArgumentError(
          absl::StrFormat("BPE: token \"%s\" has negative id %d", token, id));
    if (!vocab.emplace(token, id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("BPE: token \"%s\" is listed twice", token));
    }
    max_id = std::max(max_id, id);
  }
  for (const AddedToken& a : spec.added_tokens) {
    if (a.content.empty() || a.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("BPE: added token %d needs a non-empty content and an id >= 0", a.id));
    }
    max_id = std::max(max_id, a.id);
  }
  impl->tokens.assign(static_cast<size_t>(max_id + 1), std::string());
  impl->special.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : spec.vocab) {
    if (!impl->tokens[static_cast<size_t>(id)].empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("BPE: id %d is given to two tokens", id));
    }
    impl->tokens[static_cast<size_t>(id)] = token;
  }
  PAGEDKV_ASSIGN_OR_RETURN(BpeModel model, BpeModel::Create(std::move(vocab), spec.merges,
                                                            {.unk_id = spec.unk_id,
                                                             .byte_fallback = spec.byte_fallback,
                                                             .fuse_unk = spec.fuse_unk,
                                                             .ignore_merges = spec.ignore_merges}));
  impl->model.emplace(std::move(model));
  PAGEDKV_ASSIGN_OR_RETURN(impl->pipeline,
                           model_internal::Pipeline::Create(spec.normalizers, spec.pre_tokenizers));
  impl->spec = spec;
  impl->spec.vocab.clear();
  impl->spec.merges.clear();
  PAGEDKV_RETURN_IF_ERROR(BuildAdded(spec, impl.get()));
  return BpeTokenizer(std::move(impl));
}

absl::Status BpeTokenizer::BuildAdded(const BpeTokenizerSpec& spec, Impl* impl) {
  std::vector<AddedPattern> raw, normalized;
  for (const AddedToken& a : spec.added_tokens) {
    impl->tokens[static_cast<size_t>(a.id)] = a.content;
    impl->special[static_cast<size_t>(a.id)] = a.special;
    const std::string text = a.normalized ? impl->Normalize(a.content) : a.content;
    // tokenizers decodes a normalized added token as its normalized content ("▁xy" for "XY"
    // under Prepend + Lowercase), whatever the model calls that id.
    if (text != a.content) impl->decoded_as[a.id] = text;
    (a.normalized ? normalized : raw)
        .push_back(AddedPattern{.text = text,
                                .id = a.id,
                                .lstrip = a.lstrip,
                                .rstrip = a.rstrip,
                                .single_word = a.single_word});
  }
  impl->raw_added = AddedTokenMatcher(std::move(raw));
  impl->normalized_added = AddedTokenMatcher(std::move(normalized));
  const auto max = static_cast<TokenId>(impl->tokens.size());
  auto check = [&](std::optional<TokenId> id, const char* what) -> absl::Status {
    if (id.has_value() &&
        (*id < 0 || *id >= max || impl->tokens[static_cast<size_t>(*id)].empty())) {
      return absl::InvalidArgumentError(absl::StrFormat("BPE: %s id %d is not a token", what, *id));
    }
    return absl::OkStatus();
  };
  PAGEDKV_RETURN_IF_ERROR(check(spec.bos_id, "BOS"));
  PAGEDKV_RETURN_IF_ERROR(check(spec.eos_id, "EOS"));
  for (TokenId id : spec.prefix_ids) PAGEDKV_RETURN_IF_ERROR(check(id, "post-processor"));
  for (TokenId id : spec.suffix_ids) PAGEDKV_RETURN_IF_ERROR(check(id, "post-processor"));
  return absl::OkStatus();
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

std::vector<TokenId> BpeTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<TokenId> ids;
  if (add_special_tokens) ids = m.spec.prefix_ids;
  for (const TextPiece& raw : m.raw_added.Split(text)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    bool lead_kept = true;
    const std::string normalized = m.Normalize(raw.text, &lead_kept);
    for (const TextPiece& piece : m.normalized_added.Split(normalized)) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
      } else {
        const bool at_start =
            raw.text.data() == text.data() && piece.text.data() == normalized.data() && lead_kept;
        m.EncodeSegment(piece.text, at_start, &ids);
      }
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), m.spec.suffix_ids.begin(), m.spec.suffix_ids.end());
  return ids;
}

// tokenizers' decode without a decoder: the non-special token strings joined by " " (a " "
// first when the text continues a sequence). REQUIRES: every id is in the vocabulary.
std::string BpeTokenizer::Impl::JoinTokens(absl::Span<const TokenId> ids, bool at_start) const {
  std::string out;
  bool first = at_start;
  for (TokenId id : ids) {
    if (special[static_cast<size_t>(id)]) continue;
    if (!first) out.push_back(' ');
    out.append(DecodeString(id));
    first = false;
  }
  return out;
}

// Appends one token's decoded text to *out; byte-fallback bytes wait in *bytes until a
// non-byte token (or the end) flushes them.
void BpeTokenizer::Impl::AppendDecoded(std::string_view token, bool replace_invalid,
                                       std::string* bytes, std::string* out) const {
  if (spec.family == BpeFamily::kByteLevel) {
    bytes->append(model_internal::FromByteLevelAlphabet(token));
    return;
  }
  if (const int b = spec.byte_fallback && spec.decode_byte_fallback ? FallbackByte(token) : -1;
      b >= 0) {
    bytes->push_back(static_cast<char>(b));
    return;
  }
  if (!bytes->empty()) {  // tokenizers' ByteFallback: all or nothing per run
    const bool valid = model_internal::Utf8Lossy(*bytes) == *bytes;
    if (valid || !replace_invalid) {
      out->append(*bytes);
    } else {
      for (size_t i = 0; i < bytes->size(); ++i) out->append("\xEF\xBF\xBD");
    }
    bytes->clear();
  }
  out->append(ReplaceAll(token, kSpaceMarker, " "));
}

absl::StatusOr<std::string> BpeTokenizer::Decode(absl::Span<const TokenId> tokens, bool at_start,
                                                 bool replace_invalid_utf8) const {
  const Impl& m = *impl_;
  for (TokenId id : tokens) {
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Decode: token id %d is outside the vocabulary [0, %d)", id, vocab_size()));
    }
  }
  if (m.spec.decode_joins_with_spaces) return m.JoinTokens(tokens, at_start);
  std::string out, bytes;
  // tokenizers' Metaspace decoder: the first token decoded (special ones are skipped first).
  bool first = at_start && m.spec.metaspace_drops_first_token_markers;
  for (TokenId id : tokens) {
    if (m.special[static_cast<size_t>(id)]) continue;
    const std::string& token = m.DecodeString(id);
    if (first) {
      m.AppendDecoded(ReplaceAll(token, kSpaceMarker, ""), replace_invalid_utf8, &bytes, &out);
      first = false;
    } else {
      m.AppendDecoded(token, replace_invalid_utf8, &bytes, &out);
    }
  }
  if (m.spec.family == BpeFamily::kByteLevel) {
    out = replace_invalid_utf8 ? model_internal::Utf8Lossy(bytes) : bytes;
  } else {
    m.AppendDecoded("", replace_invalid_utf8, &bytes, &out);  // flushes pending bytes
  }
  if (at_start && m.spec.family == BpeFamily::kSentencePiece) {
    size_t n = 0;
    while (n < out.size() && n < static_cast<size_t>(m.spec.strip_leading_spaces) && out[n] == ' ')
      ++n;
    out.erase(0, n);
  }
  return out;
}

int32_t BpeTokenizer::vocab_size() const { return static_cast<int32_t>(impl_->tokens.size()); }
const std::string& BpeTokenizer::token(TokenId id) const {
  return impl_->tokens[static_cast<size_t>(id)];
}
bool BpeTokenizer::is_special(TokenId id) const { return impl_->special[static_cast<size_t>(id)]; }
std::optional<TokenId> BpeTokenizer::bos_id() const { return impl_->spec.bos_id; }
std::optional<TokenId> BpeTokenizer::eos_id() const { return impl_->spec.eos_id; }

}  // namespace pagedkv
