// Copyright 2026 The pagedkv Authors.
//
// SplitRegex::Compile (split_regex.h), the compiling half: a recursive-descent parser to a small
// syntax tree and a Thompson compiler to the Pike VM's instructions (split_regex.cc runs them).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/tokenizers/split_regex.h"
#include "engine/model/tokenizers/unicode_categories.h"

namespace pagedkv::model_internal {
namespace {

constexpr int kMaxDepth = 64;                      // group nesting
constexpr uint32_t kMaxRepeat = 1000;              // {m,n} bounds
constexpr size_t kMaxPattern = 65536;              // code points of a pattern
constexpr size_t kMaxFoldTerms = size_t{1} << 18;  // folded characters (?i:[...]) classes add

using Cat = GeneralCategory;
using split_regex_internal::Bit;
using split_regex_internal::Bits;
using split_regex_internal::LetterBits;
using split_regex_internal::NumberBits;

// The categories of \p{name}, or 0 for an unknown name.
uint32_t CategoryMask(std::string_view name) {
  struct Named {
    std::string_view name, long_name;
    uint32_t mask;
  };
  static const Named kNames[] = {
      {"L", "Letter", LetterBits()},
      {"M", "Mark", Bits(Cat::kMc, Cat::kMn)},
      {"N", "Number", NumberBits()},
      {"P", "Punctuation", Bits(Cat::kPc, Cat::kPs)},
      {"S", "Symbol", Bits(Cat::kSc, Cat::kSo)},
      {"Z", "Separator", Bits(Cat::kZl, Cat::kZs)},
      {"C", "Other", Bits(Cat::kCc, Cat::kCs)},
      {"Lu", "Uppercase_Letter", Bit(Cat::kLu)},
      {"Ll", "Lowercase_Letter", Bit(Cat::kLl)},
      {"Lt", "Titlecase_Letter", Bit(Cat::kLt)},
      {"Lm", "Modifier_Letter", Bit(Cat::kLm)},
      {"Lo", "Other_Letter", Bit(Cat::kLo)},
      {"Nd", "Decimal_Number", Bit(Cat::kNd)},
      {"Nl", "Letter_Number", Bit(Cat::kNl)},
      {"No", "Other_Number", Bit(Cat::kNo)},
  };
  for (const Named& n : kNames) {
    if (name == n.name || name == n.long_name) return n.mask;
  }
  for (int c = 0; c < kNumGeneralCategories; ++c) {
    if (name == CategoryName(static_cast<Cat>(c))) return uint32_t{1} << c;
  }
  return 0;
}

}  // namespace

// The syntax tree of a pattern.
struct RegexNode {
  enum class Kind : uint8_t { kEmpty, kChar, kClass, kConcat, kAlt, kRepeat, kAhead, kStart, kEnd };
  Kind kind = Kind::kEmpty;
  bool fold = false;          // kChar
  bool greedy = true;         // kRepeat
  bool negative = false;      // kAhead
  char32_t c = 0;             // kChar (folded when fold)
  uint32_t cls = 0;           // kClass: index into the classes
  uint32_t min = 0, max = 0;  // kRepeat; max == UINT32_MAX: unbounded
  std::vector<RegexNode> kids;
};

// Parses and compiles one pattern; the first error wins and stops the work.
class RegexCompiler {
 public:
  explicit RegexCompiler(std::string_view pattern);
  absl::StatusOr<SplitRegex> Run();

 private:
  using Node = RegexNode;
  bool Fail(std::string_view what);
  bool AtEnd() const { return pos_ >= p_.size(); }
  char32_t Peek() const { return AtEnd() ? 0 : p_[pos_]; }
  bool Eat(char32_t c);
  bool EatAscii(std::string_view s);

  Node ParseAlt(bool fold, int depth);
  Node ParseConcat(bool fold, int depth);
  Node ParseQuantified(bool fold, int depth);
  bool ParseQuantifier(Node* atom);
  bool ParseBound(uint32_t* value);
  Node ParseAtom(bool fold, int depth);
  Node ParseGroup(bool fold, int depth);
  Node ParseClass(bool fold);
  // An escape after '\\': a literal (*literal set) or a class term.
  bool ParseEscape(bool in_class, char32_t* literal, ClassTerm* term);
  bool ParseProperty(bool negated, ClassTerm* term);
  bool ParseHex(size_t max_digits, bool braced, char32_t* out);
  bool ParseClassItem(CharClass* cls);
  Node ClassNode(CharClass cls);

  uint32_t Emit(SplitRegex::Inst inst);
  void Compile(const Node& n);
  void CompileAlt(const Node& n);
  void CompileRepeat(const Node& n);
  void CompileIteration(const Node& body, int32_t slot, std::vector<uint32_t>* exits);
  void CompileOptional(const Node& body, bool greedy, int32_t slot, std::vector<uint32_t>* exits);

  std::u32string p_;
  size_t pos_ = 0;
  absl::Status error_;
  std::vector<CharClass> classes_;
  std::vector<SplitRegex::Inst> program_;
  std::vector<std::pair<const Node*, uint32_t>> lookaheads_;  // body, kAhead instruction
  uint32_t num_slots_ = 0;
  size_t fold_terms_ = 0;            // terms ClassNode added for (?i:...)
  std::vector<int32_t> slot_stack_;  // the nullable loops being compiled, innermost last
  std::vector<int32_t> slot_of_;     // per instruction: its innermost nullable loop, or -1
};

namespace {

// Whether `n` can match the empty string.
bool Nullable(const RegexNode& n) {
  using K = RegexNode::Kind;
  switch (n.kind) {
    case K::kChar:
    case K::kClass:
      return false;
    case K::kConcat:
      for (const RegexNode& k : n.kids) {
        if (!Nullable(k)) return false;
      }
      return true;
    case K::kAlt:
      for (const RegexNode& k : n.kids) {
        if (Nullable(k)) return true;
      }
      return false;
    case K::kRepeat:
      return n.min == 0 || Nullable(n.kids[0]);
    default:
      return true;
  }
}

}  // namespace

RegexCompiler::RegexCompiler(std::string_view pattern) {
  for (size_t i = 0; i < pattern.size();) p_.push_back(NextCodePoint(pattern, &i));
}

bool RegexCompiler::Fail(std::string_view what) {
  if (error_.ok()) {
    error_ = absl::InvalidArgumentError(absl::StrCat("Split regex: ", std::string(what),
                                                     " at character ", pos_, " of the pattern"));
  }
  return false;
}

bool RegexCompiler::Eat(char32_t c) {
  if (AtEnd() || p_[pos_] != c) return false;
  ++pos_;
  return true;
}

bool RegexCompiler::EatAscii(std::string_view s) {
  if (p_.size() - pos_ < s.size()) return false;
  for (size_t k = 0; k < s.size(); ++k) {
    if (p_[pos_ + k] != static_cast<char32_t>(s[k])) return false;
  }
  pos_ += s.size();
  return true;
}

absl::StatusOr<SplitRegex> RegexCompiler::Run() {
  if (p_.size() > kMaxPattern) {
    return absl::InvalidArgumentError(
        absl::StrCat("Split regex: a pattern longer than ", kMaxPattern, " characters"));
  }
  const Node root = ParseAlt(/*fold=*/false, 0);
  if (error_.ok() && !AtEnd()) Fail("unmatched ')'");
  if (error_.ok()) Compile(root);
  Emit({.op = SplitRegex::Op::kMatch});
  for (size_t k = 0; k < lookaheads_.size() && error_.ok(); ++k) {  // bodies may add more
    const auto [body, inst] = lookaheads_[k];
    program_[inst].x = static_cast<uint32_t>(program_.size());
    Compile(*body);
    Emit({.op = SplitRegex::Op::kMatch});
  }
  if (!error_.ok()) return error_;
  SplitRegex re;
  re.program_ = std::move(program_);
  re.classes_ = std::move(classes_);
  re.num_slots_ = num_slots_;
  re.slot_of_ = std::move(slot_of_);
  re.ComputeClosures();
  return re;
}

RegexNode RegexCompiler::ParseAlt(bool fold, int depth) {
  Node first = ParseConcat(fold, depth);
  if (Peek() != '|') return first;
  Node alt{.kind = Node::Kind::kAlt};
  alt.kids.push_back(std::move(first));
  while (error_.ok() && Eat('|')) alt.kids.push_back(ParseConcat(fold, depth));
  return alt;
}

RegexNode RegexCompiler::ParseConcat(bool fold, int depth) {
  Node cat{.kind = Node::Kind::kConcat};
  while (error_.ok() && !AtEnd() && Peek() != '|' && Peek() != ')') {
    cat.kids.push_back(ParseQuantified(fold, depth));
  }
  if (cat.kids.size() == 1) return std::move(cat.kids[0]);
  return cat;
}

RegexNode RegexCompiler::ParseQuantified(bool fold, int depth) {
  Node atom = ParseAtom(fold, depth);
  if (!error_.ok() || AtEnd()) return atom;
  const char32_t c = Peek();
  if (c != '?' && c != '*' && c != '+' && c != '{') return atom;
  if (atom.kind == Node::Kind::kStart || atom.kind == Node::Kind::kEnd ||
      atom.kind == Node::Kind::kAhead) {
    Fail("a quantifier after an anchor or lookahead");
    return atom;
  }
  const size_t at = pos_;
  if (!ParseQuantifier(&atom)) {
    if (!error_.ok()) return atom;
    pos_ = at;  // '{' that starts no valid bound is a literal, as in Oniguruma
    return atom;
  }
  const char32_t after = Peek();
  if (after == '+') Fail("a possessive quantifier");
  if (after == '*' || after == '{' || (after == '?' && !atom.greedy)) Fail("a nested quantifier");
  return atom;
}

// Wraps *atom in a kRepeat for the quantifier at pos_; false (pos_ unspecified) when '{' starts
// no valid bound.
bool RegexCompiler::ParseQuantifier(Node* atom) {
  uint32_t min = 0, max = UINT32_MAX;
  if (Eat('?')) {
    max = 1;
  } else if (Eat('+')) {
    min = 1;
  } else if (!Eat('*')) {  // '{'
    ++pos_;
    const bool has_min = ParseBound(&min);
    if (Eat(',')) {
      if (Peek() != '}' && !ParseBound(&max)) return false;
      if (!has_min && max == UINT32_MAX) return false;
    } else {
      if (!has_min) return false;
      max = min;
    }
    if (!Eat('}')) return false;
    if (min > max) return Fail("a bound {m,n} with m > n");
  }
  Node rep{.kind = Node::Kind::kRepeat, .greedy = !Eat('?'), .min = min, .max = max};
  rep.kids.push_back(std::move(*atom));
  *atom = std::move(rep);
  return true;
}

bool RegexCompiler::ParseBound(uint32_t* value) {
  const size_t start = pos_;
  uint32_t v = 0;
  while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
    v = v * 10 + static_cast<uint32_t>(Peek() - '0');
    if (v > kMaxRepeat) return Fail(absl::StrCat("a repetition bound over ", kMaxRepeat));
    ++pos_;
  }
  *value = v;
  return pos_ > start;
}

RegexNode RegexCompiler::ParseAtom(bool fold, int depth) {
  const char32_t c = p_[pos_++];
  switch (c) {
    case '(':
      return ParseGroup(fold, depth + 1);
    case '[':
      return ParseClass(fold);
    case '.':
      return ClassNode(CharClass{.terms = {{.kind = ClassTerm::Kind::kAnyButNewline}}});
    case '^':
      return Node{.kind = Node::Kind::kStart};
    case '$':
      return Node{.kind = Node::Kind::kEnd};
    case '*':
    case '+':
    case '?':
      Fail("a quantifier with nothing to repeat");
      return Node{};
    case '\\': {
      char32_t literal = 0;
      ClassTerm term;
      if (!ParseEscape(/*in_class=*/false, &literal, &term)) return Node{};
      if (literal == 0 && term.kind != ClassTerm::Kind::kRange) {
        return ClassNode(CharClass{.terms = {term}});  // Oniguruma folds no bare \p{..}
      }
      return Node{
          .kind = Node::Kind::kChar, .fold = fold, .c = fold ? SimpleFold(literal) : literal};
    }
    default:
      return Node{.kind = Node::Kind::kChar, .fold = fold, .c = fold ? SimpleFold(c) : c};
  }
}

RegexNode RegexCompiler::ParseGroup(bool fold, int depth) {
  if (depth > kMaxDepth) {
    Fail(absl::StrCat("groups nested deeper than ", kMaxDepth));
    return Node{};
  }
  Node ahead{.kind = Node::Kind::kAhead};
  bool is_ahead = false;
  if (Eat('?')) {
    if (EatAscii("i:")) {
      fold = true;
    } else if (EatAscii("-i:")) {
      fold = false;
    } else if (Eat('=') || Eat('!')) {
      is_ahead = true;
      ahead.negative = p_[pos_ - 1] == '!';
    } else if (EatAscii("<=") || EatAscii("<!")) {
      Fail("a lookbehind (?<= or (?<!");
    } else if (Eat('<') || EatAscii("P<")) {
      while (!AtEnd() && Peek() != '>') ++pos_;  // a named group: the name does not matter
      if (!Eat('>')) Fail("an unterminated group name");
    } else if (Eat('>')) {
      Fail("an atomic group (?>");
    } else if (!Eat(':')) {
      Fail("a group flag or construct other than (?: (?i: (?-i: (?= (?! (?<name>");
    }
  }
  Node body = ParseAlt(fold, depth);
  if (error_.ok() && !Eat(')')) Fail("a missing ')'");
  if (!is_ahead) return body;
  ahead.kids.push_back(std::move(body));
  return ahead;
}

RegexNode RegexCompiler::ClassNode(CharClass cls) {
  if (cls.fold) {  // [A-Z] under (?i) also holds the folded forms, so 'a' finds 'A's fold
    const size_t n = cls.terms.size();
    for (size_t k = 0; k < n; ++k) {
      const ClassTerm t = cls.terms[k];
      if (t.kind != ClassTerm::Kind::kRange || t.negated || t.hi - t.lo > 0x3000) continue;
      for (char32_t x = t.lo; x <= t.hi; ++x) {
        const char32_t f = SimpleFold(x);
        if (f != x) cls.terms.push_back({.lo = f, .hi = f});
      }
    }
    fold_terms_ += cls.terms.size() - n;
    if (fold_terms_ > kMaxFoldTerms) Fail("case-insensitive classes too large");
  }
  cls.Prepare();
  classes_.push_back(std::move(cls));
  return Node{.kind = Node::Kind::kClass, .cls = static_cast<uint32_t>(classes_.size() - 1)};
}

RegexNode RegexCompiler::ParseClass(bool fold) {
  CharClass cls{.negated = Eat('^'), .fold = fold};
  bool first = true;
  while (error_.ok()) {
    if (AtEnd()) {
      Fail("a missing ']'");
      break;
    }
    if (Peek() == ']' && !first) {
      ++pos_;
      break;
    }
    if (Peek() == '[') {
      Fail("a nested class or POSIX bracket [[...]]");
      break;
    }
    if (EatAscii("&&")) {
      Fail("a class intersection &&");
      break;
    }
    ParseClassItem(&cls);
    first = false;
  }
  return ClassNode(std::move(cls));
}

// One member of a class: a character, a range a-z, or an escape.
bool RegexCompiler::ParseClassItem(CharClass* cls) {
  char32_t lo = p_[pos_++];
  ClassTerm term;
  if (lo == '\\') {
    lo = 0;
    if (!ParseEscape(/*in_class=*/true, &lo, &term)) return false;
    if (lo == 0 && term.kind != ClassTerm::Kind::kRange) {
      cls->terms.push_back(term);
      return true;
    }
  }
  char32_t hi = lo;
  if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
    ++pos_;
    hi = p_[pos_++];
    if (hi == '\\') {
      hi = 0;
      if (!ParseEscape(/*in_class=*/true, &hi, &term) || hi == 0) {
        return Fail("a class range ending in a class escape");
      }
    }
    if (hi < lo) return Fail("a class range out of order");
  }
  cls->terms.push_back({.lo = lo, .hi = hi});
  return true;
}

bool RegexCompiler::ParseEscape(bool in_class, char32_t* literal, ClassTerm* term) {
  if (AtEnd()) return Fail("a trailing backslash");
  const char32_t c = p_[pos_++];
  using K = ClassTerm::Kind;
  switch (c) {
    case 's':
    case 'S':
      *term = {.kind = K::kSpace, .negated = c == 'S'};
      return true;
    case 'd':
    case 'D':
      *term = {.kind = K::kDigit, .negated = c == 'D'};
      return true;
    case 'w':
    case 'W':
      *term = {.kind = K::kWord, .negated = c == 'W'};
      return true;
    case 'p':
    case 'P':
      return ParseProperty(c == 'P', term);
    case 'r':
      *literal = '\r';
      return true;
    case 'n':
      *literal = '\n';
      return true;
    case 't':
      *literal = '\t';
      return true;
    case 'f':
      *literal = '\f';
      return true;
    case 'v':
      *literal = '\v';
      return true;
    case 'a':
      *literal = '\a';
      return true;
    case 'e':
      *literal = 0x1B;
      return true;
    case 'x':
      return Eat('{') ? ParseHex(8, /*braced=*/true, literal) : ParseHex(2, false, literal);
    case 'u':
      return ParseHex(4, /*braced=*/false, literal);
    default:
      break;
  }
  if (c == '0') return Fail("a NUL escape \\0 (not supported)");
  if (c < 0x80 && ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) {
    return Fail(absl::StrCat("the escape \\", std::string(1, static_cast<char>(c)),
                             in_class ? " in a class" : ""));
  }
  if (c >= '1' && c <= '9') return Fail("a backreference");
  *literal = c;
  return true;
}

bool RegexCompiler::ParseHex(size_t max_digits, bool braced, char32_t* out) {
  char32_t v = 0;
  size_t n = 0;
  for (; n < max_digits && !AtEnd(); ++n) {
    const char32_t h = Peek() | 0x20;
    const int d = h >= '0' && h <= '9'   ? static_cast<int>(h - '0')
                  : h >= 'a' && h <= 'f' ? static_cast<int>(h - 'a' + 10)
                                         : -1;
    if (d < 0) break;
    v = v * 16 + static_cast<char32_t>(d);
    ++pos_;
  }
  if (n == 0 || (braced && !Eat('}')) || v > 0x10FFFF || v == 0) {
    return Fail("a bad hexadecimal escape");
  }
  *out = v;
  return true;
}

bool RegexCompiler::ParseProperty(bool negated, ClassTerm* term) {
  std::string name;
  if (Eat('{')) {
    if (Eat('^')) negated = !negated;
    while (!AtEnd() && Peek() != '}' && Peek() < 0x80)
      name.push_back(static_cast<char>(p_[pos_++]));
    if (!Eat('}')) return Fail("an unterminated \\p{...}");
  } else if (!AtEnd() && Peek() < 0x80) {
    name.push_back(static_cast<char>(p_[pos_++]));
  }
  const uint32_t mask = CategoryMask(name);
  if (mask == 0) {
    return Fail(
        absl::StrCat("the property \\p{", name, "} (only general categories such as L, Lu, N, P)"));
  }
  *term = {.kind = ClassTerm::Kind::kCategories, .negated = negated, .categories = mask};
  return true;
}

uint32_t RegexCompiler::Emit(SplitRegex::Inst inst) {
  if (program_.size() >= SplitRegex::kMaxProgram) {
    Fail(absl::StrCat("a pattern that compiles past ", SplitRegex::kMaxProgram,
                      " instructions (large {m,n} bounds)"));
    return 0;
  }
  program_.push_back(inst);
  slot_of_.push_back(slot_stack_.empty() ? -1 : slot_stack_.back());
  return static_cast<uint32_t>(program_.size() - 1);
}

void RegexCompiler::Compile(const Node& n) {
  using Op = SplitRegex::Op;
  if (!error_.ok()) return;
  switch (n.kind) {
    case Node::Kind::kEmpty:
      return;
    case Node::Kind::kChar:
      Emit({.op = Op::kChar, .fold = n.fold, .c = n.c});
      return;
    case Node::Kind::kClass:
      Emit({.op = Op::kClass, .x = n.cls});
      return;
    case Node::Kind::kConcat:
      for (const Node& k : n.kids) Compile(k);
      return;
    case Node::Kind::kAlt:
      return CompileAlt(n);
    case Node::Kind::kRepeat:
      return CompileRepeat(n);
    case Node::Kind::kAhead:
      lookaheads_.emplace_back(&n.kids[0], Emit({.op = Op::kAhead, .y = n.negative ? 1u : 0u}));
      return;
    case Node::Kind::kStart:
      Emit({.op = Op::kLineStart});
      return;
    case Node::Kind::kEnd:
      Emit({.op = Op::kLineEnd});
      return;
  }
}

void RegexCompiler::CompileAlt(const Node& n) {
  using Op = SplitRegex::Op;
  std::vector<uint32_t> exits;
  for (size_t k = 0; k < n.kids.size() && error_.ok(); ++k) {
    if (k + 1 == n.kids.size()) {
      Compile(n.kids[k]);
      break;
    }
    const uint32_t split = Emit({.op = Op::kSplit});
    program_[split].x = static_cast<uint32_t>(program_.size());
    Compile(n.kids[k]);
    exits.push_back(Emit({.op = Op::kJmp}));
    program_[split].y = static_cast<uint32_t>(program_.size());
  }
  if (!error_.ok()) return;
  for (uint32_t e : exits) program_[e].x = static_cast<uint32_t>(program_.size());
}

// One iteration of body. With a slot (body can match empty) an iteration that consumed nothing
// leaves the repeat, as Oniguruma's empty check does; its Progress is left in *exits.
void RegexCompiler::CompileIteration(const Node& body, int32_t slot, std::vector<uint32_t>* exits) {
  if (slot < 0) return Compile(body);
  Emit({.op = SplitRegex::Op::kSetSlot, .x = static_cast<uint32_t>(slot)});
  slot_stack_.push_back(slot);
  Compile(body);
  exits->push_back(Emit({.op = SplitRegex::Op::kProgress, .x = static_cast<uint32_t>(slot)}));
  slot_stack_.pop_back();
}

// One optional iteration (a Split to it or past it); the Split's exit is left in *exits.
void RegexCompiler::CompileOptional(const Node& body, bool greedy, int32_t slot,
                                    std::vector<uint32_t>* exits) {
  const uint32_t split = Emit({.op = SplitRegex::Op::kSplit});
  const uint32_t enter = static_cast<uint32_t>(program_.size());
  CompileIteration(body, slot, exits);
  if (!error_.ok()) return;
  program_[split].x = greedy ? enter : 0;
  program_[split].y = greedy ? 0 : enter;
  exits->push_back(split);
}

void RegexCompiler::CompileRepeat(const Node& n) {
  using Op = SplitRegex::Op;
  const Node& body = n.kids[0];
  const int32_t slot = Nullable(body) ? static_cast<int32_t>(num_slots_++) : -1;
  std::vector<uint32_t> exits;
  for (uint32_t k = 0; k < n.min && error_.ok(); ++k) CompileIteration(body, slot, &exits);
  if (n.max == UINT32_MAX) {  // loop: Split(iteration, out); iteration; Jmp back
    const uint32_t loop = static_cast<uint32_t>(program_.size());
    CompileOptional(body, n.greedy, slot, &exits);
    Emit({.op = Op::kJmp, .x = loop});
  } else {
    for (uint32_t k = n.min; k < n.max && error_.ok(); ++k) {
      CompileOptional(body, n.greedy, slot, &exits);
    }
  }
  if (!error_.ok()) return;
  const auto out = static_cast<uint32_t>(program_.size());
  for (uint32_t s : exits) {
    SplitRegex::Inst& inst = program_[s];
    (inst.op == Op::kProgress || n.greedy ? inst.y : inst.x) = out;
  }
}

absl::StatusOr<SplitRegex> SplitRegex::Compile(std::string_view pattern) {
  return RegexCompiler(pattern).Run();
}

}  // namespace pagedkv::model_internal
