// Copyright 2026 The pagedkv Authors.
//
// BpeModel: the "BPE" model of Hugging Face tokenizers over one pre-tokenized word. The word
// starts as one symbol per UTF-8 character (its vocabulary id; else, with byte_fallback, one
// "<0xNN>" symbol per byte when all exist; else unk, consecutive unks fused with fuse_unk, or
// the character dropped when there is no unk token). Then the adjacent pair with the lowest
// merge rank (the leftmost on ties) is merged until no listed pair is left. With ignore_merges
// a word that is itself in the vocabulary is emitted whole.
//
// Cost: O(n log n) in the word's characters (a priority queue of candidate merges over a linked
// list of symbols, as SentencePiece's BPE and tokenizers' Word::merge_all), so a whole text with
// no pre-tokenizer (the SentencePiece style) is fine.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(BpeModel m, BpeModel::Create(vocab, {{"a", "b"}}, {}));
//   std::vector<TokenId> ids;
//   m.EncodeWord("abab", &ids);  // {id("ab"), id("ab")}
//
// Thread-compatible: EncodeWord is const.
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_BPE_MODEL_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_BPE_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv::model_internal {

struct PAGEDKV_EXPORT BpeModelOptions {
  std::optional<TokenId> unk_id = std::nullopt;  // id of the unknown token, if any
  bool byte_fallback = false;                    // unknown characters as "<0xNN>" byte tokens
  bool fuse_unk = false;                         // consecutive unknowns become one unk
  bool ignore_merges = false;                    // a word in the vocabulary is one token
};

class PAGEDKV_EXPORT BpeModel {
 public:
  // `vocab` maps each token to its id; merges[r] = (left, right) has rank r. InvalidArgument
  // when a merge names a token (or yields a concatenation) that is not in the vocabulary, or
  // unk_id is not one of the vocabulary's ids.
  static absl::StatusOr<BpeModel> Create(
      absl::flat_hash_map<std::string, TokenId> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges,
      const BpeModelOptions& options);

  // Appends the ids of `word` to *out (see the banner).
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;

  // The id of `token`, or nullopt.
  std::optional<TokenId> Find(std::string_view token) const;
  const absl::flat_hash_map<std::string, TokenId>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    TokenId new_id;
  };
  struct Symbol {
    TokenId id;
    int32_t prev, next;  // neighbours in the list; -1 at the ends
    int32_t len;         // bytes of the word it covers; 0 once merged into its left neighbour
  };
  static uint64_t PairKey(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::vector<Symbol> InitialSymbols(std::string_view word) const;
  void MergeAll(std::vector<Symbol>* symbols) const;

  absl::flat_hash_map<std::string, TokenId> vocab_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::vector<TokenId> byte_ids_;  // "<0xNN>" ids, -1 where absent (with byte_fallback)
  BpeModelOptions options_;
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_BPE_MODEL_H_
