// Copyright 2026 The pagedkv Authors.
//
// Tokenizer: the engine's tokenizer: llama2.c's BPE tokenizer (a SentencePiece vocabulary
// exported to a flat file, below), or a Hugging Face BPE tokenizer (FromBpe / LoadHuggingFace over
// pagedkv/model/bpe_tokenizer.h: Encode with add_bos applies its post-processor template, Decode
// skips special tokens and strips the SentencePiece leading space when prev is BOS).
//
// File format: int32 max_token_length, then for each of vocab_size tokens: float32 score,
// int32 length, `length` bytes (the piece, no terminator). Ids 0, 1, 2 are <unk>, BOS, EOS by
// llama2.c convention; byte-fallback pieces are spelled "<0xNN>".
//
// Encode follows run.c: BOS first (optional), then the dummy-prefix " " piece when the text is
// not empty, then one piece per UTF-8 code point (the code point's bytes as "<0xNN>" pieces when
// it is not in the vocabulary), then repeatedly merge the adjacent pair whose concatenation is a
// piece with the highest score (the leftmost on ties) until no pair merges. Decode maps a piece
// back to its bytes: "<0xNN>" becomes the raw byte, and a leading space right after BOS is
// dropped (the dummy prefix).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::Tokenizer tok,
//                            pagedkv::Tokenizer::Load("tok512.bin", /*vocab_size=*/512));
//   PAGEDKV_ASSIGN_OR_RETURN(std::vector<pagedkv::TokenId> ids, tok.Encode("Echoes of"));
//   // ids[0] == tok.bos_id()
//   PAGEDKV_ASSIGN_OR_RETURN(std::string text, tok.Decode(ids));  // "Echoes of"
#ifndef PAGEDKV_MODEL_TOKENIZER_H_
#define PAGEDKV_MODEL_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pagedkv/export.h"
#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/types.h"

namespace pagedkv {

// Options for Tokenizer::Encode.
struct PAGEDKV_EXPORT EncodeOptions {
  bool add_bos = true;   // prepend BOS (id 1), as run.c does for prompts
  bool add_eos = false;  // append EOS (id 2)
};

class PAGEDKV_EXPORT Tokenizer {
 public:
  static constexpr TokenId kUnkId = 0;
  static constexpr TokenId kBosId = 1;
  static constexpr TokenId kEosId = 2;

  // Reads a llama2.c tokenizer file holding exactly `vocab_size` tokens (the model's vocabulary
  // size). NotFound when it cannot be opened; InvalidArgument naming the file for a truncated or
  // malformed file (negative or oversized lengths, pieces longer than max_token_length, trailing
  // bytes, non-finite scores, vocab_size < 3).
  static absl::StatusOr<Tokenizer> Load(const std::string& path, int32_t vocab_size);

  // Same, from the file's bytes; `name` is used in error messages.
  static absl::StatusOr<Tokenizer> Parse(std::string_view bytes, int32_t vocab_size,
                                         std::string_view name);

  // A Hugging Face tokenizer. `bos_id` / `eos_id` (e.g. from config.json) override the spec's
  // when set. InvalidArgument when they are outside the tokenizer's ids.
  static absl::StatusOr<Tokenizer> FromBpe(BpeTokenizer bpe, std::optional<TokenId> bos_id,
                                           std::optional<TokenId> eos_id);

  // Loads a tokenizer.json (pagedkv/model/hf_tokenizer.h) with FromBpe's overrides.
  static absl::StatusOr<Tokenizer> LoadHuggingFace(const std::string& path,
                                                   std::optional<TokenId> bos_id = std::nullopt,
                                                   std::optional<TokenId> eos_id = std::nullopt);

  Tokenizer(Tokenizer&&) = default;
  Tokenizer& operator=(Tokenizer&&) = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids for `text` (run.c's rule, see the banner; a Hugging Face tokenizer's own rules,
  // never failing). The empty text gives {BOS} alone (with
  // add_bos). InvalidArgument when the vocabulary lacks a piece the text needs: the " " dummy
  // prefix, or the "<0xNN>" byte-fallback piece of a byte not otherwise covered.
  absl::StatusOr<std::vector<TokenId>> Encode(std::string_view text,
                                              const EncodeOptions& options = {}) const;

  // The bytes of `token` when it follows `prev` (run.c's decode): "<0xNN>" gives the raw byte;
  // after BOS a leading space is dropped; BOS and EOS give "". InvalidArgument for an id
  // outside [0, vocab_size).
  absl::StatusOr<std::string> DecodeToken(TokenId prev, TokenId token) const;

  // Concatenated DecodeToken over `tokens`, each with its predecessor, the first with `prev`
  // (so Decode(Encode(text)) == text, and a continuation decodes with prev = the last prompt
  // token). BOS and EOS decode to nothing. InvalidArgument for an id outside [0, vocab_size).
  absl::StatusOr<std::string> Decode(absl::Span<const TokenId> tokens, TokenId prev = kBosId) const;

  // One more than the largest id (llama2.c: the file's token count).
  int32_t vocab_size() const {
    return bpe_ != nullptr ? bpe_->vocab_size() : static_cast<int32_t>(pieces_.size());
  }
  int32_t max_token_length() const { return max_token_length_; }
  // BOS and EOS; -1 when a Hugging Face tokenizer has none.
  TokenId bos_id() const { return bos_id_; }
  TokenId eos_id() const { return eos_id_; }
  // REQUIRES: 0 <= id < vocab_size().
  const std::string& piece(TokenId id) const {
    return bpe_ != nullptr ? bpe_->token(id) : pieces_[static_cast<size_t>(id)];
  }
  // llama2.c's merge score; 0 for a Hugging Face tokenizer (its merges go by rank).
  float score(TokenId id) const {
    return bpe_ != nullptr ? 0.0f : scores_[static_cast<size_t>(id)];
  }
  // The Hugging Face tokenizer, or null for a llama2.c one.
  const BpeTokenizer* bpe() const { return bpe_.get(); }

 private:
  Tokenizer() = default;
  // Fills piece_to_id_, byte_to_id_ and piece_byte_ from pieces_.
  void IndexPieces();
  // Encode's merge pass over the initial pieces (in place; see the .cc).
  void MergeByScore(std::vector<TokenId>& tokens) const;
  // Encode for a Hugging Face tokenizer (bpe_ set).
  absl::StatusOr<std::vector<TokenId>> EncodeBpe(std::string_view text,
                                                 const EncodeOptions& options) const;

  int32_t max_token_length_ = 0;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  absl::flat_hash_map<std::string, TokenId> piece_to_id_;  // first id of each piece
  std::array<TokenId, 256> byte_to_id_{};                  // "<0xNN>" piece ids; -1 if absent
  std::vector<int16_t> piece_byte_;                        // byte of "<0xNN>" pieces, else -1
  std::shared_ptr<const BpeTokenizer> bpe_;                // set for a Hugging Face tokenizer
  TokenId bos_id_ = kBosId;
  TokenId eos_id_ = kEosId;
};

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_TOKENIZER_H_
