// Copyright 2026 The pagedkv Authors.
//
// tokenizer.json parsing (pagedkv/model/hf_tokenizer.h): each component is checked and mapped onto
// BpeTokenizerSpec; an unsupported one is refused by name.
#include "pagedkv/model/hf_tokenizer.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/formats/file_bytes.h"
#include "engine/model/formats/json_fields.h"
#include "nlohmann/json.hpp"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using model_internal::FindField;
using model_internal::OptionalBool;
using model_internal::OptionalInt;
using model_internal::OptionalString;
using model_internal::RequiredString;
using nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // "▁"
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

absl::Status Refuse(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": unsupported ", what));
}

// The components of `c`: its "Sequence" members (under `list_key`), or c itself.
std::vector<const json*> Members(const json& c, const char* list_key) {
  std::vector<const json*> out;
  const json* type = FindField(c, "type");
  const json* list = FindField(c, list_key);
  if (type != nullptr && *type == "Sequence" && list != nullptr && list->is_array()) {
    for (const json& m : *list) out.push_back(&m);
  } else {
    out.push_back(&c);
  }
  return out;
}

absl::StatusOr<std::string> TypeOf(const json& c, const std::string& where) {
  if (!c.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  return RequiredString(c, "type", where);
}

// A Replace's {"pattern": {"String": from}, "content": to}.
absl::StatusOr<std::pair<std::string, std::string>> ReplacePair(const json& c,
                                                                const std::string& where) {
  const json* p = FindField(c, "pattern");
  const json* from = p != nullptr && p->is_object() ? FindField(*p, "String") : nullptr;
  if (from == nullptr || !from->is_string()) {
    return Refuse(where, "Replace pattern (only {\"String\": ...})");
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::string to, RequiredString(c, "content", where));
  return std::make_pair(from->get<std::string>(), to);
}

absl::Status ParseNormalizer(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  spec->prepend_space_marker = false;
  spec->replace_spaces = false;
  const json* n = FindField(root, "normalizer");
  if (n == nullptr) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": normalizer");
  for (const json* m : Members(*n, "normalizers")) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(*m, at));
    if (type == "NFC") {
      spec->nfc = true;
    } else if (type == "Prepend") {
      PAGEDKV_ASSIGN_OR_RETURN(std::string p, RequiredString(*m, "prepend", at));
      if (p != kSpaceMarker) return Refuse(at, absl::StrCat("Prepend of \"", p, "\" (only ▁)"));
      spec->prepend_space_marker = true;
    } else if (type == "Replace") {
      PAGEDKV_ASSIGN_OR_RETURN(auto pair, ReplacePair(*m, at));
      if (pair.first != " " || pair.second != kSpaceMarker) {
        return Refuse(at, "Replace (only \" \" -> \"▁\")");
      }
      spec->replace_spaces = true;
    } else {
      return Refuse(at, absl::StrCat("type \"", type, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseByteLevelPre(const json& m, const std::string& at, bool* use_regex,
                               BpeTokenizerSpec* spec) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> prefix, OptionalBool(m, "add_prefix_space", at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> regex, OptionalBool(m, "use_regex", at));
  spec->add_prefix_space = prefix.value_or(true);
  *use_regex = regex.value_or(true);
  return absl::OkStatus();
}

absl::Status ParseSplit(const json& m, const std::string& at, BpeTokenizerSpec* spec) {
  const json* p = FindField(m, "pattern");
  const json* re = p != nullptr && p->is_object() ? FindField(*p, "Regex") : nullptr;
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> behavior, OptionalString(m, "behavior", at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> invert, OptionalBool(m, "invert", at));
  if (re == nullptr || !re->is_string() || behavior.value_or("") != "Isolated" ||
      invert.value_or(false)) {
    return Refuse(at, "Split (only {\"Regex\": ...}, behavior Isolated, invert false)");
  }
  const std::string r = re->get<std::string>();
  if (r == kGpt2Regex)
    spec->split = ByteLevelSplit::kGpt2;
  else if (r == kLlama3Regex)
    spec->split = ByteLevelSplit::kLlama3;
  else if (r == kQwen2Regex)
    spec->split = ByteLevelSplit::kQwen2;
  else
    return Refuse(at, absl::StrCat("Split regex ", r, " (known: GPT-2's, Llama-3's, Qwen2's)"));
  return absl::OkStatus();
}

// Metaspace's prepend_scheme ("always", "first", "never"; older files: add_prefix_space).
absl::StatusOr<MetaspaceMode> MetaspaceScheme(const json& m, const std::string& at) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string replacement, RequiredString(m, "replacement", at));
  if (replacement != kSpaceMarker) return Refuse(at, "Metaspace replacement (only ▁)");
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> scheme,
                           OptionalString(m, "prepend_scheme", at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> prefix, OptionalBool(m, "add_prefix_space", at));
  const std::string s = scheme.value_or(prefix.value_or(true) ? "always" : "never");
  if (s == "always") return MetaspaceMode::kAlways;
  if (s == "first") return MetaspaceMode::kFirst;
  if (s == "never") return MetaspaceMode::kNever;
  return Refuse(at, absl::StrCat("Metaspace prepend_scheme \"", s, "\""));
}

absl::Status ParsePreTokenizer(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  const json* p = FindField(root, "pre_tokenizer");
  spec->family = BpeFamily::kSentencePiece;
  if (p == nullptr) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": pre_tokenizer");
  const json* type = p->is_object() ? FindField(*p, "type") : nullptr;
  if (type != nullptr && *type == "Metaspace") {
    PAGEDKV_ASSIGN_OR_RETURN(spec->metaspace, MetaspaceScheme(*p, at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> split, OptionalBool(*p, "split", at));
    spec->metaspace_split = split.value_or(true);
    return absl::OkStatus();
  }
  bool split = false, byte_level = false, use_regex = false, digits = false;
  for (const json* m : Members(*p, "pretokenizers")) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(*m, at));
    if (type == "ByteLevel" && !byte_level) {
      PAGEDKV_RETURN_IF_ERROR(ParseByteLevelPre(*m, at, &use_regex, spec));
      byte_level = true;
    } else if (type == "Split" && !split && !byte_level && !digits) {
      PAGEDKV_RETURN_IF_ERROR(ParseSplit(*m, at, spec));
      split = true;
    } else if (type == "Digits" && !digits && !split && !byte_level) {
      // SmolLM's: every digit a piece of its own, then GPT-2's regex on the rest.
      PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> each, OptionalBool(*m, "individual_digits", at));
      if (!each.value_or(false)) return Refuse(at, "Digits without individual_digits");
      digits = true;
    } else {
      return Refuse(at, absl::StrCat("type \"", type, "\" here"));
    }
  }
  if (!byte_level || split == use_regex || (digits && !use_regex)) {
    return Refuse(at,
                  "combination (ByteLevel with use_regex, after Digits or not, or Split then "
                  "ByteLevel without)");
  }
  if (use_regex) spec->split = digits ? ByteLevelSplit::kGpt2Digits : ByteLevelSplit::kGpt2;
  spec->family = BpeFamily::kByteLevel;
  return absl::OkStatus();
}

absl::Status ParseMerges(const json& merges, const std::string& at, BpeTokenizerSpec* spec) {
  if (!merges.is_array())
    return absl::InvalidArgumentError(absl::StrCat(at, ": merges must be a list"));
  for (const json& m : merges) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ": merge \"", s, "\" must be two tokens separated by one space"));
      }
      spec->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec->merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(at, ": a merge must be \"a b\" or [a, b]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseVocab(const json& vocab, const std::string& at, BpeTokenizerSpec* spec) {
  if (!vocab.is_object())
    return absl::InvalidArgumentError(absl::StrCat(at, ": vocab must be an object"));
  spec->vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() >= (int64_t{1} << 31)) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": vocab entry \"", it.key(), "\" needs an id in [0, 2^31)"));
    }
    spec->vocab.emplace_back(it.key(), static_cast<TokenId>(it.value().get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::Status ParseModel(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  const std::string at = absl::StrCat(where, ": model");
  const json* m = FindField(root, "model");
  if (m == nullptr) return absl::InvalidArgumentError(at + " is missing");
  PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(*m, at));
  if (type != "BPE") return Refuse(at, absl::StrCat("type \"", type, "\" (only BPE)"));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> dropout,
                           model_internal::OptionalNumber(*m, "dropout", at));
  if (dropout.value_or(0.0) != 0.0) return Refuse(at, "dropout (only null)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> v, OptionalString(*m, key, at));
    if (v.has_value() && !v->empty()) return Refuse(at, absl::StrCat(key, " \"", *v, "\""));
  }
  const json* vocab = FindField(*m, "vocab");
  const json* merges = FindField(*m, "merges");
  if (vocab == nullptr || merges == nullptr)
    return absl::InvalidArgumentError(at + " needs vocab and merges");
  PAGEDKV_RETURN_IF_ERROR(ParseVocab(*vocab, at, spec));
  PAGEDKV_RETURN_IF_ERROR(ParseMerges(*merges, at, spec));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> unk, OptionalString(*m, "unk_token", at));
  if (unk.has_value()) {
    auto it = vocab->find(*unk);
    if (it == vocab->end())
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": unk_token \"", *unk, "\" is not in the vocab"));
    spec->unk_id = static_cast<TokenId>(it->get<int64_t>());
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> fuse, OptionalBool(*m, "fuse_unk", at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> fallback, OptionalBool(*m, "byte_fallback", at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> ignore, OptionalBool(*m, "ignore_merges", at));
  spec->fuse_unk = fuse.value_or(false);
  spec->byte_fallback = fallback.value_or(false);
  spec->ignore_merges = ignore.value_or(false);
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  const json* list = FindField(root, "added_tokens");
  if (list == nullptr) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": added_tokens");
  if (!list->is_array()) return absl::InvalidArgumentError(at + " must be a list");
  for (const json& t : *list) {
    if (!t.is_object()) return absl::InvalidArgumentError(at + ": each entry must be an object");
    AddedToken a;
    PAGEDKV_ASSIGN_OR_RETURN(int64_t id, model_internal::RequiredInt(t, "id", at));
    PAGEDKV_ASSIGN_OR_RETURN(a.content, RequiredString(t, "content", at));
    if (id < 0 || id >= (int64_t{1} << 31))
      return absl::InvalidArgumentError(absl::StrCat(at, ": bad id ", id));
    a.id = static_cast<TokenId>(id);
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> special, OptionalBool(t, "special", at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> normalized, OptionalBool(t, "normalized", at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> lstrip, OptionalBool(t, "lstrip", at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> rstrip, OptionalBool(t, "rstrip", at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> single, OptionalBool(t, "single_word", at));
    if (single.value_or(false))
      return Refuse(at, absl::StrCat("single_word on \"", a.content, "\""));
    a.special = special.value_or(false);
    a.normalized = normalized.value_or(!a.special);  // tokenizers' default
    a.lstrip = lstrip.value_or(false);
    a.rstrip = rstrip.value_or(false);
    spec->added_tokens.push_back(std::move(a));
  }
  return absl::OkStatus();
}

// TemplateProcessing's "single": special tokens before and after {"Sequence": {"id": "A"}}.
absl::Status ParseTemplate(const json& m, const std::string& at, BpeTokenizerSpec* spec) {
  const json* single = FindField(m, "single");
  const json* specials = FindField(m, "special_tokens");
  if (single == nullptr || !single->is_array() || specials == nullptr || !specials->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(at, ": TemplateProcessing needs single and special_tokens"));
  }
  bool seen_sequence = false;
  for (const json& piece : *single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const json* st = piece.is_object() ? FindField(piece, "SpecialToken") : nullptr;
    const json* name = st != nullptr && st->is_object() ? FindField(*st, "id") : nullptr;
    const json* entry = name != nullptr && name->is_string()
                            ? FindField(*specials, name->get<std::string>())
                            : nullptr;
    const json* ids = entry != nullptr && entry->is_object() ? FindField(*entry, "ids") : nullptr;
    if (ids == nullptr || !ids->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": a template piece names no known special token"));
    }
    for (const json& id : *ids) {
      if (!id.is_number_integer())
        return absl::InvalidArgumentError(absl::StrCat(at, ": special token ids must be integers"));
      (seen_sequence ? spec->suffix_ids : spec->prefix_ids)
          .push_back(static_cast<TokenId>(id.get<int64_t>()));
    }
  }
  return absl::OkStatus();
}

absl::Status ParsePostProcessor(const json& root, const std::string& where,
                                BpeTokenizerSpec* spec) {
  const json* p = FindField(root, "post_processor");
  if (p == nullptr) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": post_processor");
  for (const json* m : Members(*p, "processors")) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(*m, at));
    if (type == "TemplateProcessing") {
      PAGEDKV_RETURN_IF_ERROR(ParseTemplate(*m, at, spec));
    } else if (type != "ByteLevel") {  // ByteLevel only trims offsets
      return Refuse(at, absl::StrCat("type \"", type, "\""));
    }
  }
  if (!spec->prefix_ids.empty()) spec->bos_id = spec->prefix_ids.front();
  return absl::OkStatus();
}

// A SentencePiece-style decoder step other than Replace and Strip: ByteFallback, Fuse, Metaspace.
absl::Status ParseSentencePieceStep(const json& m, const std::string& type, const std::string& at,
                                    bool* fused, BpeTokenizerSpec* spec) {
  if (type == "ByteFallback") {
    spec->decode_byte_fallback = true;
  } else if (type == "Fuse") {
    *fused = true;
  } else {  // Metaspace: "▁" -> " ", and with always / first every "▁" of the first token dropped
    PAGEDKV_ASSIGN_OR_RETURN(MetaspaceMode mode, MetaspaceScheme(m, at));
    spec->metaspace_drops_first_token_markers = mode != MetaspaceMode::kNever;
  }
  return absl::OkStatus();
}

absl::Status ParseDecoder(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  spec->strip_leading_spaces = 0;
  spec->metaspace_drops_first_token_markers = false;
  const json* d = FindField(root, "decoder");
  if (d == nullptr) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": decoder");
  const bool byte_level = spec->family == BpeFamily::kByteLevel;
  if (!byte_level) spec->decode_byte_fallback = false;  // only with a ByteFallback step
  bool fused = false;  // a Fuse step came before: Strip then works on the whole text
  for (const json* m : Members(*d, "decoders")) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(*m, at));
    if (byte_level && type == "ByteLevel") continue;
    if (!byte_level && (type == "ByteFallback" || type == "Fuse" || type == "Metaspace")) {
      PAGEDKV_RETURN_IF_ERROR(ParseSentencePieceStep(*m, type, at, &fused, spec));
      continue;
    }
    if (!byte_level && type == "Replace") {
      PAGEDKV_ASSIGN_OR_RETURN(auto pair, ReplacePair(*m, at));
      if (pair.first != kSpaceMarker || pair.second != " ")
        return Refuse(at, "Replace (only \"▁\" -> \" \")");
      continue;
    }
    if (!byte_level && type == "Strip") {
      PAGEDKV_ASSIGN_OR_RETURN(std::string content, RequiredString(*m, "content", at));
      PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> start, OptionalInt(*m, "start", at));
      PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> stop, OptionalInt(*m, "stop", at));
      if (content != " " || stop.value_or(0) != 0 || start.value_or(0) < 0 ||
          start.value_or(0) > 64) {
        return Refuse(at, "Strip (only leading spaces)");
      }
      if (!fused) return Refuse(at, "Strip before Fuse (tokenizers strips each token then)");
      spec->strip_leading_spaces = static_cast<int32_t>(start.value_or(0));
      continue;
    }
    return Refuse(at,
                  absl::StrCat("type \"", type, "\" for a ",
                               byte_level ? "byte-level" : "SentencePiece-style", " tokenizer"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeTokenizerSpec> ParseHfTokenizerJson(const std::string& json_text,
                                                      const std::string& where) {
  PAGEDKV_ASSIGN_OR_RETURN(json root, model_internal::ParseJson(json_text, where));
  if (!root.is_object())
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
  if (FindField(root, "truncation") != nullptr) return Refuse(where, "truncation (set it to null)");
  BpeTokenizerSpec spec;
  PAGEDKV_RETURN_IF_ERROR(ParseModel(root, where, &spec));
  PAGEDKV_RETURN_IF_ERROR(ParseAddedTokens(root, where, &spec));
  PAGEDKV_RETURN_IF_ERROR(ParseNormalizer(root, where, &spec));
  PAGEDKV_RETURN_IF_ERROR(ParsePreTokenizer(root, where, &spec));
  if (spec.family == BpeFamily::kByteLevel && (spec.prepend_space_marker || spec.replace_spaces)) {
    return Refuse(where, "normalizer with a ByteLevel pre-tokenizer");
  }
  if (spec.metaspace != MetaspaceMode::kOff && (spec.prepend_space_marker || spec.replace_spaces)) {
    return Refuse(where, "Prepend/Replace normalizer together with a Metaspace pre-tokenizer");
  }
  PAGEDKV_RETURN_IF_ERROR(ParsePostProcessor(root, where, &spec));
  PAGEDKV_RETURN_IF_ERROR(ParseDecoder(root, where, &spec));
  return spec;
}

absl::StatusOr<BpeTokenizerSpec> LoadHfTokenizerJson(const std::string& path) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string text, model_internal::ReadFileBytes(path, "tokenizer.json"));
  return ParseHfTokenizerJson(text, path);
}

}  // namespace pagedkv
