// Copyright 2026 The pagedkv Authors.
//
// The generic normalizer and pre-tokenizer of a BpeTokenizerSpec (its `normalizers` and
// `pre_tokenizers` steps), as tokenizers runs them: the normalizers rewrite a text segment in
// order; each pre-tokenizer splits every piece the previous one left (tokenizers'
// PreTokenizedString), with the split behaviours of SplitDelimiterBehavior and, for a regex, the
// matches of SplitRegex. A piece remembers whether it starts the text (Metaspace's "first").
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(Pipeline p, Pipeline::Create(
//       {{.kind = NormalizerStep::Kind::kLowercase}},
//       {{.kind = PreTokenizerStep::Kind::kWhitespace}}));
//   std::string n = p.Normalize("Hi, you");   // "hi, you"
//   p.PreTokenize(n, /*at_start=*/true);      // {"hi", ",", "you"}
//
// Thread-compatible: every method is const.
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_PIPELINE_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_PIPELINE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizers/split_regex.h"
#include "pagedkv/export.h"
#include "pagedkv/model/bpe_tokenizer.h"

namespace pagedkv::model_internal {

// A span [begin, end) of a piece's bytes and whether the split's pattern matched it.
struct SplitSpan {
  size_t begin = 0, end = 0;
  bool match = false;
};

// tokenizers' NormalizedString::split: the pieces that `behavior` makes of `spans` (which cover
// the text in order), empty ones dropped. Byte ranges into the text.
PAGEDKV_EXPORT std::vector<SplitSpan> ApplySplitBehavior(std::vector<SplitSpan> spans,
                                                         SplitBehavior behavior);

class PAGEDKV_EXPORT Pipeline {
 public:
  // InvalidArgument naming the step when a pattern does not compile (split_regex.h) or a
  // literal pattern is empty.
  static absl::StatusOr<Pipeline> Create(const std::vector<NormalizerStep>& normalizers,
                                         const std::vector<PreTokenizerStep>& pre_tokenizers);

  // The hand-written splitter that does `step`'s work (an Isolated, not inverted Split with
  // GPT-2's, Llama-3's or Qwen2's regex), if any.
  static std::optional<ByteLevelSplit> KnownByteLevelSplit(const PreTokenizerStep& step);

  bool has_normalizers() const { return !normalizers_.empty(); }
  bool has_pre_tokenizers() const { return !pre_tokenizers_.empty(); }

  // `segment` after every normalizer step. *lead_kept (when given) tells whether the result's
  // first character still comes from the segment's first one (tokenizers' alignments: false
  // once Strip or an empty Replace removed leading characters), which Metaspace's "first"
  // scheme needs.
  std::string Normalize(std::string_view segment, bool* lead_kept = nullptr) const;
  // The words of a normalized segment for the model; `at_start`: the segment starts the text.
  std::vector<std::string> PreTokenize(std::string_view segment, bool at_start) const;

 private:
  struct Piece {
    std::string text;
    bool at_start = false;
  };
  void RunStep(size_t step, const Piece& piece, std::vector<Piece>* out) const;
  void SplitBy(const Piece& piece, const std::vector<SplitSpan>& spans, SplitBehavior behavior,
               std::vector<Piece>* out) const;
  void Bert(const Piece& piece, std::vector<Piece>* out) const;
  void ByteLevel(const PreTokenizerStep& step, const Piece& piece, std::vector<Piece>* out) const;
  void Metaspace(const PreTokenizerStep& step, const Piece& piece, std::vector<Piece>* out) const;

  std::vector<NormalizerStep> normalizers_;
  std::vector<std::optional<SplitRegex>> normalizer_regex_;  // kReplace
  std::vector<PreTokenizerStep> pre_tokenizers_;
  std::vector<std::optional<SplitRegex>> pre_tokenizer_regex_;  // kSplit
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_PIPELINE_H_
