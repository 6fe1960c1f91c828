// Copyright 2026 The pagedkv Authors.
//
// tokenizer.ggml.* -> Tokenizer (see gguf_tokenizer.h).
#include "engine/model/tokenizers/gguf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

constexpr int64_t kControl = 3, kUserDefined = 4;

absl::Status Bad(const GgufFile& f, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF file '", f.path(), "': ", what));
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;  // token_type per token (1, normal, when the key is absent)
};

absl::StatusOr<Vocab> ReadVocab(const GgufFile& f) {
  Vocab v;
  PAGEDKV_ASSIGN_OR_RETURN(const std::vector<GgufValue>* tokens,
                           f.GetArray("tokenizer.ggml.tokens", GgufValueType::kString));
  if (tokens->empty()) return Bad(f, "key 'tokenizer.ggml.tokens' is empty");
  for (const GgufValue& t : *tokens) v.tokens.push_back(t.s);
  v.types.assign(v.tokens.size(), 1);
  if (f.Find("tokenizer.ggml.token_type") != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(const std::vector<GgufValue>* types,
                             f.GetArray("tokenizer.ggml.token_type", GgufValueType::kInt32));
    if (types->size() != v.tokens.size()) {
      return Bad(f, absl::StrCat("key 'tokenizer.ggml.token_type' has ", types->size(),
                                 " entries for ", v.tokens.size(), " tokens"));
    }
    for (size_t i = 0; i < types->size(); ++i) v.types[i] = (*types)[i].i;
  }
  return v;
}

// An optional token id key; InvalidArgument when outside the vocabulary.
absl::StatusOr<std::optional<TokenId>> OptionalId(const GgufFile& f, const std::string& key,
                                                  size_t vocab) {
  if (f.Find(key) == nullptr) return std::nullopt;
  PAGEDKV_ASSIGN_OR_RETURN(int64_t id, f.GetInt(key));
  if (id < 0 || id >= static_cast<int64_t>(vocab)) {
    return Bad(f, absl::StrCat("key '", key, "' = ", id, " is outside the ", vocab, " tokens"));
  }
  return static_cast<TokenId>(id);
}

absl::StatusOr<bool> OptionalBool(const GgufFile& f, const std::string& key, bool fallback) {
  if (f.Find(key) == nullptr) return fallback;
  return f.GetBool(key);
}

absl::StatusOr<ByteLevelSplit> SplitFor(const GgufFile& f) {
  std::string pre = "default";
  if (f.Find("tokenizer.ggml.pre") != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(pre, f.GetString("tokenizer.ggml.pre"));
  }
  if (pre == "default" || pre == "gpt2" || pre == "gpt-2") return ByteLevelSplit::kGpt2;
  if (pre == "llama-bpe" || pre == "llama3") return ByteLevelSplit::kLlama3;
  if (pre == "qwen2") return ByteLevelSplit::kQwen2;
  if (pre == "smollm" || pre == "starcoder" || pre == "refact") {
    return ByteLevelSplit::kGpt2Digits;
  }
  return Bad(f, absl::StrCat("key 'tokenizer.ggml.pre' = '", pre,
                             "' is not supported (default, gpt2, llama-bpe, llama3, qwen2, "
                             "smollm, starcoder, refact are)"));
}

absl::Status ReadMerges(const GgufFile& f, BpeTokenizerSpec* spec) {
  PAGEDKV_ASSIGN_OR_RETURN(const std::vector<GgufValue>* merges,
                           f.GetArray("tokenizer.ggml.merges", GgufValueType::kString));
  spec->merges.reserve(merges->size());
  for (size_t r = 0; r < merges->size(); ++r) {
    const std::string& m = (*merges)[r].s;
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      return Bad(f, absl::StrCat("key 'tokenizer.ggml.merges' entry ", r, " ('", m,
                                 "') is not \"left right\""));
    }
    spec->merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return absl::OkStatus();
}

// The llama2.c tokenizer file bytes for a "llama" (SentencePiece) vocabulary.
absl::StatusOr<std::string> Llama2cBytes(const GgufFile& f, const Vocab& v) {
  PAGEDKV_ASSIGN_OR_RETURN(const std::vector<GgufValue>* scores,
                           f.GetArray("tokenizer.ggml.scores", GgufValueType::kFloat32));
  if (scores->size() != v.tokens.size()) {
    return Bad(f, absl::StrCat("key 'tokenizer.ggml.scores' has ", scores->size(), " entries for ",
                               v.tokens.size(), " tokens"));
  }
  std::vector<std::string> pieces;
  int32_t max_len = 1;
  for (const std::string& t : v.tokens) {
    std::string p;
    for (size_t i = 0; i < t.size();) {  // "▁" (E2 96 81) -> " "
      if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
        p += ' ';
        i += 3;
      } else {
        p += t[i++];
      }
    }
    if (p.size() > (1u << 20)) return Bad(f, "a token of tokenizer.ggml.tokens is over 1 MiB");
    max_len = std::max(max_len, static_cast<int32_t>(p.size()));
    pieces.push_back(std::move(p));
  }
  std::string out(reinterpret_cast<const char*>(&max_len), 4);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto score = static_cast<float>((*scores)[i].f);
    const auto len = static_cast<int32_t>(pieces[i].size());
    out.append(reinterpret_cast<const char*>(&score), 4);
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += pieces[i];
  }
  return out;
}

absl::StatusOr<Tokenizer> LoadSentencePiece(const GgufFile& f, const Vocab& v) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<TokenId> bos,
                           OptionalId(f, "tokenizer.ggml.bos_token_id", v.tokens.size()));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<TokenId> eos,
                           OptionalId(f, "tokenizer.ggml.eos_token_id", v.tokens.size()));
  PAGEDKV_ASSIGN_OR_RETURN(bool space, OptionalBool(f, "tokenizer.ggml.add_space_prefix", true));
  if (bos.value_or(Tokenizer::kBosId) != Tokenizer::kBosId ||
      eos.value_or(Tokenizer::kEosId) != Tokenizer::kEosId || !space) {
    return Bad(f, "a 'llama' tokenizer needs BOS 1, EOS 2 and add_space_prefix true");
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::string bytes, Llama2cBytes(f, v));
  return Tokenizer::Parse(bytes, static_cast<int32_t>(v.tokens.size()), f.path());
}

}  // namespace

bool HasGgufTokenizer(const GgufFile& file) { return file.Find("tokenizer.ggml.model") != nullptr; }

absl::StatusOr<BpeTokenizerSpec> GgufByteLevelSpec(const GgufFile& f) {
  PAGEDKV_ASSIGN_OR_RETURN(Vocab v, ReadVocab(f));
  BpeTokenizerSpec spec;
  spec.family = BpeFamily::kByteLevel;
  PAGEDKV_ASSIGN_OR_RETURN(spec.split, SplitFor(f));
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const auto id = static_cast<TokenId>(i);
    spec.vocab.emplace_back(v.tokens[i], id);
    if (v.types[i] == kControl || v.types[i] == kUserDefined) {
      spec.added_tokens.push_back(
          {.content = v.tokens[i], .id = id, .special = v.types[i] == kControl});
    }
  }
  PAGEDKV_RETURN_IF_ERROR(ReadMerges(f, &spec));
  const size_t n = v.tokens.size();
  PAGEDKV_ASSIGN_OR_RETURN(spec.bos_id, OptionalId(f, "tokenizer.ggml.bos_token_id", n));
  PAGEDKV_ASSIGN_OR_RETURN(spec.eos_id, OptionalId(f, "tokenizer.ggml.eos_token_id", n));
  PAGEDKV_ASSIGN_OR_RETURN(spec.unk_id, OptionalId(f, "tokenizer.ggml.unknown_token_id", n));
  // Padding plays no part in encoding; its id is only checked.
  PAGEDKV_RETURN_IF_ERROR(OptionalId(f, "tokenizer.ggml.padding_token_id", n).status());
  PAGEDKV_ASSIGN_OR_RETURN(bool add_bos, OptionalBool(f, "tokenizer.ggml.add_bos_token", false));
  if (add_bos && !spec.bos_id.has_value()) {
    return Bad(f, "key 'tokenizer.ggml.add_bos_token' is true but there is no bos_token_id");
  }
  if (add_bos) spec.prefix_ids = {*spec.bos_id};
  return spec;
}

absl::StatusOr<Tokenizer> LoadGgufTokenizer(const GgufFile& f) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string model, f.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    PAGEDKV_ASSIGN_OR_RETURN(Vocab v, ReadVocab(f));
    return LoadSentencePiece(f, v);
  }
  if (model != "gpt2") {
    return Bad(f, absl::StrCat("key 'tokenizer.ggml.model' = '", model,
                               "' is not supported (gpt2 and llama are)"));
  }
  PAGEDKV_ASSIGN_OR_RETURN(BpeTokenizerSpec spec, GgufByteLevelSpec(f));
  absl::StatusOr<BpeTokenizer> bpe = BpeTokenizer::Create(spec);
  if (!bpe.ok()) return Bad(f, absl::StrCat("tokenizer: ", bpe.status().message()));
  return Tokenizer::FromBpe(std::move(bpe).value(), spec.bos_id, spec.eos_id);
}

absl::StatusOr<std::vector<TokenId>> GgufStopTokens(const GgufFile& f) {
  std::vector<TokenId> stops;
  if (!HasGgufTokenizer(f)) return stops;
  PAGEDKV_ASSIGN_OR_RETURN(Vocab v, ReadVocab(f));
  auto add = [&stops](TokenId id) {
    if (std::find(stops.begin(), stops.end(), id) == stops.end()) stops.push_back(id);
  };
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<TokenId> id, OptionalId(f, key, v.tokens.size()));
    if (id.has_value()) add(*id);
  }
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string& t = v.tokens[i];
    if (v.types[i] == kControl && (t == "<|endoftext|>" || t == "<|im_end|>" || t == "<|eot_id|>" ||
                                   t == "<|end|>" || t == "<end_of_turn>")) {
      add(static_cast<TokenId>(i));
    }
  }
  return stops;
}

}  // namespace pagedkv::model_internal
