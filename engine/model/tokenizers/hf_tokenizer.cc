// Copyright 2026 The pagedkv Authors.
//
// tokenizer.json parsing (pagedkv/model/hf_tokenizer.h): each component is checked and mapped onto
// BpeTokenizerSpec; an unsupported one is refused by name.
#include "pagedkv/model/hf_tokenizer.h"

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/formats/file_bytes.h"
#include "engine/model/formats/json_fields.h"
#include "engine/model/tokenizers/pipeline.h"
#include "engine/model/tokenizers/split_regex.h"
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
absl::Status Refuse(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": unsupported ", what));
}

// The components of `c`: its "Sequence" members (under `list_key`, nested sequences flattened),
// or c itself.
void AppendMembers(const json& c, const char* list_key, int depth, std::vector<const json*>* out) {
  const json* type = c.is_object() ? FindField(c, "type") : nullptr;
  const json* list = c.is_object() ? FindField(c, list_key) : nullptr;
  if (depth < 8 && type != nullptr && *type == "Sequence" && list != nullptr && list->is_array()) {
    for (const json& m : *list) AppendMembers(m, list_key, depth + 1, out);
  } else {
    out->push_back(&c);
  }
}

std::vector<const json*> Members(const json& c, const char* list_key) {
  std::vector<const json*> out;
  AppendMembers(c, list_key, 0, &out);
  return out;
}

absl::StatusOr<std::string> TypeOf(const json& c, const std::string& where) {
  if (!c.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": must be an object"));
  return RequiredString(c, "type", where);
}

// A pattern {"String": s} or {"Regex": r}: (text, is_regex).
absl::StatusOr<std::pair<std::string, bool>> PatternOf(const json& c, const std::string& where) {
  const json* p = FindField(c, "pattern");
  const json* str = p != nullptr && p->is_object() ? FindField(*p, "String") : nullptr;
  const json* re = p != nullptr && p->is_object() ? FindField(*p, "Regex") : nullptr;
  if (str != nullptr && str->is_string()) return std::make_pair(str->get<std::string>(), false);
  if (re != nullptr && re->is_string()) {
    std::string r = re->get<std::string>();
    if (absl::Status st = model_internal::SplitRegex::Compile(r).status(); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.message()));
    }
    return std::make_pair(std::move(r), true);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": pattern must be {\"String\": ...} or {\"Regex\": ...}"));
}

// A Replace's {"pattern": {"String": from}, "content": to} (decoders: String only).
absl::StatusOr<std::pair<std::string, std::string>> ReplacePair(const json& c,
                                                                const std::string& where) {
  PAGEDKV_ASSIGN_OR_RETURN(auto pattern, PatternOf(c, where));
  if (pattern.second) return Refuse(where, "Replace with a Regex pattern here (only String)");
  PAGEDKV_ASSIGN_OR_RETURN(std::string to, RequiredString(c, "content", where));
  return std::make_pair(pattern.first, to);
}

absl::StatusOr<NormalizerStep> ParseNormalizerStep(const json& m, const std::string& at) {
  using K = NormalizerStep::Kind;
  PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(m, at));
  NormalizerStep n;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    n.kind = type == "NFC"    ? K::kNfc
             : type == "NFD"  ? K::kNfd
             : type == "NFKC" ? K::kNfkc
                              : K::kNfkd;
  } else if (type == "Lowercase") {
    n.kind = K::kLowercase;
  } else if (type == "StripAccents") {
    n.kind = K::kStripAccents;
  } else if (type == "Strip") {
    n.kind = K::kStrip;
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> left, OptionalBool(m, "strip_left", at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> right, OptionalBool(m, "strip_right", at));
    n.strip_left = left.value_or(true);
    n.strip_right = right.value_or(true);
  } else if (type == "Prepend") {
    n.kind = K::kPrepend;
    PAGEDKV_ASSIGN_OR_RETURN(n.content, RequiredString(m, "prepend", at));
  } else if (type == "Replace") {
    n.kind = K::kReplace;
    PAGEDKV_ASSIGN_OR_RETURN(auto pattern, PatternOf(m, at + " Replace"));
    if (!pattern.second && pattern.first.empty()) return Refuse(at, "Replace of an empty String");
    std::tie(n.pattern, n.regex) = pattern;
    PAGEDKV_ASSIGN_OR_RETURN(n.content, RequiredString(m, "content", at));
  } else {
    return Refuse(
        at, absl::StrCat("type \"", type,
                         "\" (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, "
                         "Prepend, Replace, Sequence)"));
  }
  return n;
}

absl::Status ParseNormalizer(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  spec->prepend_space_marker = false;
  spec->replace_spaces = false;
  const json* n = FindField(root, "normalizer");
  if (n == nullptr || n->is_null()) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": normalizer");
  for (const json* m : Members(*n, "normalizers")) {
    PAGEDKV_ASSIGN_OR_RETURN(NormalizerStep step, ParseNormalizerStep(*m, at));
    spec->normalizers.push_back(std::move(step));
  }
  return absl::OkStatus();
}

absl::StatusOr<SplitBehavior> BehaviorOf(const json& m, const std::string& at) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<std::string> b, OptionalString(m, "behavior", at));
  const std::string v = b.value_or("Isolated");
  if (v == "Removed") return SplitBehavior::kRemoved;
  if (v == "Isolated") return SplitBehavior::kIsolated;
  if (v == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (v == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (v == "Contiguous") return SplitBehavior::kContiguous;
  return Refuse(at, absl::StrCat("behavior \"", v, "\""));
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

absl::StatusOr<PreTokenizerStep> ParseByteLevelStep(const json& m, const std::string& at) {
  PreTokenizerStep t{.kind = PreTokenizerStep::Kind::kByteLevel};
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> prefix, OptionalBool(m, "add_prefix_space", at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> regex, OptionalBool(m, "use_regex", at));
  t.add_prefix_space = prefix.value_or(true);
  t.use_regex = regex.value_or(true);
  return t;
}

absl::StatusOr<PreTokenizerStep> ParseSplitStep(const json& m, const std::string& at) {
  PreTokenizerStep t{.kind = PreTokenizerStep::Kind::kSplit};
  PAGEDKV_ASSIGN_OR_RETURN(auto pattern, PatternOf(m, at + " Split"));
  if (!pattern.second && pattern.first.empty()) return Refuse(at, "Split on an empty String");
  std::tie(t.pattern, t.regex) = pattern;
  PAGEDKV_ASSIGN_OR_RETURN(t.behavior, BehaviorOf(m, at));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> invert, OptionalBool(m, "invert", at));
  t.invert = invert.value_or(false);
  return t;
}

absl::StatusOr<PreTokenizerStep> ParsePreTokenizerStep(const json& m, const std::string& at) {
  using K = PreTokenizerStep::Kind;
  PAGEDKV_ASSIGN_OR_RETURN(std::string type, TypeOf(m, at));
  if (type == "ByteLevel") return ParseByteLevelStep(m, at);
  if (type == "Split") return ParseSplitStep(m, at);
  PreTokenizerStep t;
  if (type == "Metaspace") {
    t.kind = K::kMetaspace;
    PAGEDKV_ASSIGN_OR_RETURN(t.metaspace, MetaspaceScheme(m, at));
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> split, OptionalBool(m, "split", at));
    t.metaspace_split = split.value_or(true);
  } else if (type == "Digits") {
    t.kind = K::kDigits;
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<bool> each, OptionalBool(m, "individual_digits", at));
    t.individual_digits = each.value_or(false);
  } else if (type == "Punctuation") {
    t.kind = K::kPunctuation;
    PAGEDKV_ASSIGN_OR_RETURN(t.behavior, BehaviorOf(m, at));
  } else if (type == "Whitespace") {
    t.kind = K::kWhitespace;
  } else if (type == "WhitespaceSplit") {
    t.kind = K::kWhitespaceSplit;
  } else if (type == "BertPreTokenizer") {
    t.kind = K::kBert;
  } else {
    return Refuse(at,
                  absl::StrCat("type \"", type,
                               "\" (supported: ByteLevel, Split, Metaspace, Digits, Punctuation, "
                               "Whitespace, WhitespaceSplit, BertPreTokenizer, Sequence)"));
  }
  return t;
}

// Maps the steps onto the family's hand-written pre-tokenizer when they are one of the shapes it
// implements exactly (Metaspace alone; ByteLevel with its regex, after Digits(individual) or not;
// a known Split then ByteLevel without regex); false otherwise.
bool UseFastPath(const std::vector<PreTokenizerStep>& steps, BpeTokenizerSpec* spec) {
  using K = PreTokenizerStep::Kind;
  const size_t n = steps.size();
  if (n == 1 && steps[0].kind == K::kMetaspace) {
    spec->metaspace = steps[0].metaspace;
    spec->metaspace_split = steps[0].metaspace_split;
    return true;
  }
  if (n == 0 || n > 2 || steps[n - 1].kind != K::kByteLevel) return false;
  const PreTokenizerStep& bl = steps[n - 1];
  if (n == 1) {
    if (!bl.use_regex) return false;
    spec->split = ByteLevelSplit::kGpt2;
    spec->add_prefix_space = bl.add_prefix_space;
    return true;
  }
  if (bl.add_prefix_space) return false;  // tokenizers prefixes every piece, the fast path one
  if (steps[0].kind == K::kDigits && steps[0].individual_digits && bl.use_regex) {
    spec->split = ByteLevelSplit::kGpt2Digits;
    return true;
  }
  const auto known = model_internal::Pipeline::KnownByteLevelSplit(steps[0]);
  if (!known.has_value() || bl.use_regex) return false;
  spec->split = *known;
  return true;
}

absl::Status ParsePreTokenizer(const json& root, const std::string& where, BpeTokenizerSpec* spec) {
  const json* p = FindField(root, "pre_tokenizer");
  spec->family = BpeFamily::kSentencePiece;
  if (p == nullptr || p->is_null()) return absl::OkStatus();
  const std::string at = absl::StrCat(where, ": pre_tokenizer");
  std::vector<PreTokenizerStep> steps;
  for (const json* m : Members(*p, "pretokenizers")) {
    PAGEDKV_ASSIGN_OR_RETURN(PreTokenizerStep step, ParsePreTokenizerStep(*m, at));
    if (step.kind == PreTokenizerStep::Kind::kByteLevel) spec->family = BpeFamily::kByteLevel;
    steps.push_back(std::move(step));
  }
  if (!UseFastPath(steps, spec)) spec->pre_tokenizers = std::move(steps);
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
    a.single_word = single.value_or(false);
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
  spec->decode_joins_with_spaces = d == nullptr || d->is_null();
  if (spec->decode_joins_with_spaces) return absl::OkStatus();
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
  PAGEDKV_RETURN_IF_ERROR(ParsePostProcessor(root, where, &spec));
  PAGEDKV_RETURN_IF_ERROR(ParseDecoder(root, where, &spec));
  return spec;
}

absl::StatusOr<BpeTokenizerSpec> LoadHfTokenizerJson(const std::string& path) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string text, model_internal::ReadFileBytes(path, "tokenizer.json"));
  return ParseHfTokenizerJson(text, path);
}

}  // namespace pagedkv
