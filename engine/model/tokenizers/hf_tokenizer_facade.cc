// Copyright 2026 The pagedkv Authors.
//
// Tokenizer over a Hugging Face BpeTokenizer (FromBpe, LoadHuggingFace, EncodeBpe).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/model/hf_tokenizer.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::StatusOr<Tokenizer> Tokenizer::FromBpe(BpeTokenizer bpe, std::optional<TokenId> bos_id,
                                             std::optional<TokenId> eos_id) {
  const std::optional<TokenId> bos = bos_id.has_value() ? bos_id : bpe.bos_id();
  const std::optional<TokenId> eos = eos_id.has_value() ? eos_id : bpe.eos_id();
  for (const auto& [name, id] : {std::pair{"BOS", bos}, std::pair{"EOS", eos}}) {
    if (id.has_value() && (*id < 0 || *id >= bpe.vocab_size())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "tokenizer: %s id %d is outside its ids [0, %d)", name, *id, bpe.vocab_size()));
    }
  }
  Tokenizer tok;
  tok.bos_id_ = bos.value_or(-1);
  tok.eos_id_ = eos.value_or(-1);
  tok.bpe_ = std::make_shared<const BpeTokenizer>(std::move(bpe));
  return tok;
}

absl::StatusOr<Tokenizer> Tokenizer::LoadHuggingFace(const std::string& path,
                                                     std::optional<TokenId> bos_id,
                                                     std::optional<TokenId> eos_id) {
  PAGEDKV_ASSIGN_OR_RETURN(BpeTokenizerSpec spec, LoadHfTokenizerJson(path));
  absl::StatusOr<BpeTokenizer> bpe = BpeTokenizer::Create(spec);
  if (!bpe.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", path, bpe.status().message()));
  }
  return FromBpe(std::move(bpe).value(), bos_id, eos_id);
}

absl::StatusOr<std::vector<TokenId>> Tokenizer::EncodeBpe(std::string_view text,
                                                          const EncodeOptions& options) const {
  std::vector<TokenId> ids = bpe_->Encode(text, options.add_bos);
  if (options.add_eos && eos_id_ >= 0) ids.push_back(eos_id_);
  return ids;
}

}  // namespace pagedkv
