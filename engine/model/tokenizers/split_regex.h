// Copyright 2026 The pagedkv Authors.
//
// The regexes of tokenizer.json's Split pre-tokenizer (and of Whitespace's \w+|[^\w\s]+), matched
// with Oniguruma's leftmost-first (Perl) semantics as tokenizers runs them: at the leftmost
// position where the pattern matches, the first alternative that succeeds wins and quantifiers are
// greedy (lazy with a trailing ?). FindAll gives the non-overlapping matches as the onig crate's
// find_iter does (an empty match right after the previous match is skipped).
//
// Supported: literals and escapes (\r \n \t \f \v \a \e \0, \xHH, \x{H..}, \uHHHH, an escaped
// symbol), ., ^ and $ (line anchors), classes [...] with ranges, negation and the escapes below;
// \s \S \d \D \w \W (Oniguruma's Unicode definitions), \p{X} \P{X} \pX with X a general category
// (L, Lu, Ll, Lt, Lm, Lo, M.., N.., P.., S.., Z.., C.., or its long name such as Letter); groups
// (...), (?:...), (?i:...) (one-to-one case folding; Oniguruma also folds "ß" to "ss", which is
// not done), (?-i:...), (?<name>...); alternation; ? * + {m} {m,} {m,n} and their lazy forms;
// lookahead (?=...) and (?!...). As in Oniguruma, an iteration of a repeat that matches empty ends
// the repeat. Anything else (lookbehind, atomic groups, possessive
// quantifiers, backreferences, \b, scripts such as \p{Han}, nested or intersected classes) is
// refused with InvalidArgument naming the construct.
//
// Cost: a Pike VM over code points, no backtracking: one search step is O(program size), a
// search scans from its start until every thread that could still beat the current match has
// died, so FindAll is O(program size x text length) when matches do not look far past their end
// (every pattern tokenizers ship), and at most quadratic in the text length otherwise; nested
// quantifiers such as (a*)*b cannot blow up exponentially. Programs are capped at kMaxProgram
// instructions ({m,n} copies its operand, m and n at most 1000), patterns at 65536 characters,
// group nesting at 64 levels.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(SplitRegex re, SplitRegex::Compile(R"(\w+|[^\w\s]+)"));
//   std::vector<char32_t> cps = {'h', 'i', ' ', '!'};
//   re.FindAll(cps);  // {{0, 2}, {3, 4}}
//
// Thread-compatible: FindAll is const and keeps its scratch space on the stack of the call.
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_SPLIT_REGEX_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_SPLIT_REGEX_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tokenizers/unicode_categories.h"
#include "pagedkv/export.h"

namespace pagedkv::model_internal {

namespace split_regex_internal {

// ClassTerm::categories bits: one category, categories first .. last, and \p{L}'s and \p{N}'s
// sets (which matching tests with the faster IsLetter / IsNumber).
constexpr uint32_t Bit(GeneralCategory c) { return uint32_t{1} << static_cast<int>(c); }
constexpr uint32_t Bits(GeneralCategory first, GeneralCategory last) {
  uint32_t m = 0;
  for (int c = static_cast<int>(first); c <= static_cast<int>(last); ++c) m |= uint32_t{1} << c;
  return m;
}
constexpr uint32_t LetterBits() { return Bits(GeneralCategory::kLl, GeneralCategory::kLu); }
constexpr uint32_t NumberBits() { return Bits(GeneralCategory::kNd, GeneralCategory::kNo); }

}  // namespace split_regex_internal

// One term of a character class: a range, a set of general categories, or \w \s \d.
struct ClassTerm {
  enum class Kind : uint8_t { kRange, kCategories, kWord, kSpace, kDigit, kAnyButNewline };
  Kind kind = Kind::kRange;
  bool negated = false;  // \S, \P{..}
  char32_t lo = 0, hi = 0;
  uint32_t categories = 0;  // bit c: GeneralCategory c
};

struct CharClass {
  std::vector<ClassTerm> terms;
  bool negated = false;  // [^...]
  bool fold = false;     // inside (?i:...)
  bool Matches(char32_t c) const;
  // Caches Matches for ASCII in `ascii` (call once the terms are final).
  void Prepare();
  bool MatchesSlow(char32_t c) const;  // without the cache
  uint64_t ascii[2] = {0, 0};
  bool prepared = false;
};

class PAGEDKV_EXPORT SplitRegex {
 public:
  static constexpr size_t kMaxProgram = 20000;

  // InvalidArgument naming the position and the construct when `pattern` is malformed, uses an
  // unsupported construct, or compiles past kMaxProgram instructions.
  static absl::StatusOr<SplitRegex> Compile(std::string_view pattern);

  // The matches [begin, end) (code point indices into `text`), leftmost-first, in order.
  std::vector<std::pair<size_t, size_t>> FindAll(const std::vector<char32_t>& text) const;

  enum class Op : uint8_t {
    kClass,      // consume one code point in classes[arg]
    kChar,       // consume `c` (case-folded when fold)
    kSplit,      // try x, then y
    kJmp,        // go to x
    kAhead,      // continue when the program at x matches here (y: 1 for a negative lookahead)
    kLineStart,  // ^
    kLineEnd,    // $
    kSetSlot,    // slot x = this position (the start of an iteration of a loop)
    kProgress,   // the iteration that began at slot x consumed nothing: go to y (out of the loop)
    kMatch,
  };
  struct Inst {
    Op op = Op::kMatch;
    bool fold = false;
    char32_t c = 0;
    uint32_t x = 0, y = 0;
  };

 private:
  friend class RegexCompiler;
  struct ThreadList;
  struct Scratch;
  bool Run(uint32_t pc, const std::vector<char32_t>& text, size_t from, bool anchored, Scratch* s,
           std::pair<size_t, size_t>* match) const;
  struct Thread;
  void AddThread(Thread t, const std::vector<char32_t>& text, size_t pos, Scratch* s,
                 ThreadList* list) const;
  bool AddFromClosure(const Thread& t, ThreadList* list) const;
  bool MatchesAt(uint32_t pc, const std::vector<char32_t>& text, size_t pos) const;
  bool Consumes(const Inst& inst, char32_t c) const;

  std::vector<Inst> program_;  // the pattern starts at 0; lookahead bodies follow
  std::vector<CharClass> classes_;
  uint32_t num_slots_ = 0;        // loops whose body can match empty (Oniguruma leaves them then)
  std::vector<int32_t> slot_of_;  // per instruction: its innermost such loop, or -1
  // Per instruction where threads enter (0 and after each consuming one): the consuming and
  // Match instructions its jumps and splits reach, in priority order; empty when an assertion or
  // a slot is on the way (AddThread then walks the program).
  std::vector<std::vector<uint32_t>> closure_;
  void ComputeClosures();
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_SPLIT_REGEX_H_
