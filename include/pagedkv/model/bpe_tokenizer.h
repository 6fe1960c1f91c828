// Copyright 2026 The pagedkv Authors.
//
// BpeTokenizer: the two BPE tokenizer families of Hugging Face models, built from a vocabulary,
// merges and added tokens (BpeTokenizerSpec), independent of any file format. The tokenizer.json
// loader (pagedkv/model/hf_tokenizer.h) fills a spec; a GGUF loader can fill the same one from its
// tokens + merges metadata.
//
// Families (what tokenizers' components do, in this order):
//   kSentencePiece (Llama-2, TinyStories): normalizer Prepend("▁") + Replace(" " -> "▁"), no
//     pre-tokenizer (the whole normalized text is one BPE word), byte fallback to "<0xNN>",
//     fuse_unk; decoder Replace("▁" -> " "), ByteFallback, Fuse, Strip(leading spaces). Newer
//     files do the "▁" work in a Metaspace pre-tokenizer instead (MetaspaceMode).
//   kByteLevel (GPT-2, Llama-3, Qwen2): the split regex (GPT-2's, Llama-3's or Qwen2's, each
//     implemented by hand over Unicode letter/number/space classes), each piece's bytes mapped by
//     GPT-2's byte-to-unicode table, BPE per piece (ignore_merges as Llama-3); decoder ByteLevel.
// Any other tokenizer.json combination runs as generic steps (BpeTokenizerSpec::normalizers and
// ::pre_tokenizers, in the file's order, as tokenizers runs them); `family` then only picks the
// decoder and whether pieces are byte-level.
// Both: added tokens are matched first, leftmost-longest (those with normalized = false on the
// raw text, the others on the normalized text, with their content normalized too, as tokenizers
// does); lstrip / rstrip eat whitespace beside them. The post-processor template adds
// prefix_ids / suffix_ids (BOS) when EncodeOptions.add_bos. Decode skips special tokens.
//
// Example:
//   pagedkv::BpeTokenizerSpec spec;
//   spec.family = pagedkv::BpeFamily::kSentencePiece;
//   spec.vocab = {{"<unk>", 0}, {"<s>", 1}, {"▁", 2}, {"a", 3}, {"▁a", 4}};
//   spec.merges = {{"▁", "a"}};
//   spec.added_tokens = {{.content = "<s>", .id = 1}};
//   spec.unk_id = 0;
//   spec.prefix_ids = {1};
//   spec.bos_id = 1;
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::BpeTokenizer tok, pagedkv::BpeTokenizer::Create(spec));
//   tok.Encode("a a", /*add_special_tokens=*/true);  // {1, 4, 4}
//
// Thread-compatible: every method is const.
#ifndef PAGEDKV_MODEL_BPE_TOKENIZER_H_
#define PAGEDKV_MODEL_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

enum class BpeFamily {
  kSentencePiece,  // "▁" for spaces, byte fallback (Llama-2)
  kByteLevel,      // GPT-2's byte-to-unicode alphabet, split regex (GPT-2, Llama-3, Qwen2)
};

// The split regex of a byte-level tokenizer.
enum class ByteLevelSplit {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  kQwen2,   // as kLlama3 with \p{N} (one digit per piece)
  // Each \p{N} alone, then kGpt2 on the text between digits (tokenizers' Digits(individual)
  // + ByteLevel(use_regex); llama.cpp's "smollm" / "starcoder" pre-tokenizers).
  kGpt2Digits,
};

// The Metaspace pre-tokenizer of newer SentencePiece-style tokenizer.json files (its
// prepend_scheme), or kOff when the normalizer does that job.
enum class MetaspaceMode {
  kOff,     // no Metaspace pre-tokenizer
  kAlways,  // "▁" prepended to every segment (between added tokens) not starting with one
  kFirst,   // only to the segment at the start of the text
  kNever,   // spaces replaced, nothing prepended
};

// One tokenizer.json normalizer, applied in order to each text segment between added tokens.
struct PAGEDKV_EXPORT NormalizerStep {
  // kStripAccents drops every combining mark (general category M*).
  enum class Kind {
    kNfc,
    kNfd,
    kNfkc,
    kNfkd,
    kLowercase,
    kStrip,
    kPrepend,
    kReplace,
    kStripAccents
  };
  Kind kind = Kind::kNfc;
  std::string pattern;       // kReplace: what to replace (a literal, or a regex when regex)
  bool regex = false;        // kReplace: pattern is a Split-style regex (split_regex.h)
  std::string content;       // kReplace: the replacement; kPrepend: what goes before the text
  bool strip_left = false;   // kStrip: drop leading White_Space
  bool strip_right = false;  // kStrip: drop trailing White_Space
};

// tokenizers' SplitDelimiterBehavior: what happens to the matched pieces of a split.
enum class SplitBehavior {
  kRemoved,             // matches dropped
  kIsolated,            // matches are pieces of their own
  kMergedWithPrevious,  // a match joins the piece before it
  kMergedWithNext,      // a match joins the piece after it
  kContiguous,          // adjacent matches form one piece
};

// One tokenizer.json pre-tokenizer, applied in order to every piece the previous ones produced.
struct PAGEDKV_EXPORT PreTokenizerStep {
  enum class Kind {
    kSplit,            // pattern (a regex when regex, else a literal), behavior, invert
    kByteLevel,        // add_prefix_space, use_regex (GPT-2's split), then the byte alphabet
    kDigits,           // \p{N}: each alone (individual_digits) or runs of them
    kWhitespace,       // the pieces matching \w+|[^\w\s]+ (Rust regex classes); the rest dropped
    kWhitespaceSplit,  // split on White_Space, which is dropped
    kPunctuation,      // ASCII punctuation and P* characters, per behavior
    kMetaspace,  // " " -> "▁", the prepend per metaspace, split before "▁" if metaspace_split
    kBert,       // BertPreTokenizer: split on White_Space (dropped), each punctuation alone
  };
  Kind kind = Kind::kSplit;
  std::string pattern;
  bool regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
  bool use_regex = true;
  bool individual_digits = false;
  MetaspaceMode metaspace = MetaspaceMode::kAlways;
  bool metaspace_split = true;
};

struct PAGEDKV_EXPORT AddedToken {
  std::string content;
  TokenId id = 0;
  bool special = true;       // skipped by Decode
  bool normalized = false;   // matched on the normalized text
  bool lstrip = false;       // also takes the whitespace before it
  bool rstrip = false;       // also takes the whitespace after it
  bool single_word = false;  // only matches with no word character (Rust's \w) beside it
};

struct PAGEDKV_EXPORT BpeTokenizerSpec {
  BpeFamily family = BpeFamily::kSentencePiece;
  std::vector<std::pair<std::string, TokenId>> vocab;       // the model's tokens and ids
  std::vector<std::pair<std::string, std::string>> merges;  // merges[r] has rank r
  std::vector<AddedToken> added_tokens;                     // matched before the model
  std::optional<TokenId> unk_id = std::nullopt;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  bool nfc = false;  // normalizer NFC (Qwen2), before the two below
  // kSentencePiece normalizer: prepend "▁" to each non-empty segment; replace " " by "▁".
  bool prepend_space_marker = true;
  bool replace_spaces = true;
  int32_t strip_leading_spaces = 1;  // decoder Strip: spaces dropped at the start of a text
  // Decoder Metaspace with prepend_scheme "always" or "first" (tokenizers' rule): every "▁" of
  // the text's first token is dropped, not only a leading one (e.g. "▁▁hi" decodes to "hi").
  bool metaspace_drops_first_token_markers = false;
  // Decoder ByteFallback: "<0xNN>" tokens decode to their bytes (without it, to their text).
  bool decode_byte_fallback = true;
  // No decoder at all (tokenizer.json's null): Decode joins the token strings with " ", as
  // tokenizers does; a text that does not start a sequence then begins with the " ".
  bool decode_joins_with_spaces = false;
  // kSentencePiece Metaspace pre-tokenizer: " " -> "▁", the prepend per the mode, and with
  // metaspace_split each "▁"-led word is its own BPE word.
  MetaspaceMode metaspace = MetaspaceMode::kOff;
  bool metaspace_split = false;
  // kByteLevel pre-tokenizer.
  ByteLevelSplit split = ByteLevelSplit::kGpt2;
  bool add_prefix_space = false;  // ByteLevel add_prefix_space
  // Generic components (tokenizer.json in any supported combination). A non-empty normalizers
  // replaces nfc / prepend_space_marker / replace_spaces; a non-empty pre_tokenizers replaces
  // the family's pre-tokenizer (metaspace, split, add_prefix_space). `family` still picks the
  // decoder; with kByteLevel, pre_tokenizers must map to the byte alphabet (a kByteLevel step).
  std::vector<NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  // Post-processor template for one sequence: ids around it when special tokens are added.
  std::vector<TokenId> prefix_ids;
  std::vector<TokenId> suffix_ids;
  std::optional<TokenId> bos_id = std::nullopt;  // BOS (for callers; e.g. decode after BOS)
  std::optional<TokenId> eos_id = std::nullopt;
};

class PAGEDKV_EXPORT BpeTokenizer {
 public:
  // InvalidArgument naming the problem: duplicate tokens or ids, negative ids, merges over
  // unknown tokens, an unk/BOS/EOS/template id that is not a token, an empty added token.
  static absl::StatusOr<BpeTokenizer> Create(const BpeTokenizerSpec& spec);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // The ids of `text` (see the banner); with add_special_tokens the template's prefix and suffix.
  std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens) const;

  // The text of `tokens`: special tokens skipped, the family's decoder applied. With
  // at_start the decoder's Strip applies (the text starts a sequence); without it, a
  // continuation keeps its leading space. Byte-fallback / byte-level bytes that do not form
  // UTF-8 become U+FFFD with replace_invalid_utf8, and are kept raw otherwise (for streaming
  // one token at a time). InvalidArgument for an id outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const TokenId> tokens, bool at_start,
                                     bool replace_invalid_utf8) const;

  // One more than the largest id.
  int32_t vocab_size() const;
  // The token string of `id` (the model's alphabet, e.g. "▁the"); empty for an unused id.
  // REQUIRES: 0 <= id < vocab_size().
  const std::string& token(TokenId id) const;
  bool is_special(TokenId id) const;
  std::optional<TokenId> bos_id() const;
  std::optional<TokenId> eos_id() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  // Create's last step: the added-token matchers and the id checks.
  static absl::Status BuildAdded(const BpeTokenizerSpec& spec, Impl* impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_BPE_TOKENIZER_H_
