// Copyright 2026 The pagedkv Authors.
//
// SplitRegex (split_regex.h), the matching half: character classes and the Pike VM that runs a
// program (split_regex_compiler.cc parses and compiles the pattern). Priorities: a thread list is
// kept in priority order (a Split's x before its y, an earlier start before a later one), each
// instruction enters a list once per step, and a Match cuts every thread after it: that is
// leftmost-first.
#include "engine/model/tokenizers/split_regex.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/tokenizers/unicode_categories.h"

namespace pagedkv::model_internal {
namespace {

using Cat = GeneralCategory;
using split_regex_internal::Bit;

bool TermMatches(const ClassTerm& t, char32_t c) {
  bool hit = false;
  switch (t.kind) {
    case ClassTerm::Kind::kRange:
      hit = c >= t.lo && c <= t.hi;
      break;
    case ClassTerm::Kind::kCategories:
      hit = t.categories == split_regex_internal::LetterBits() ? IsLetter(c)
            : t.categories == split_regex_internal::NumberBits()
                ? IsNumber(c)
                : (t.categories & Bit(CategoryOf(c))) != 0;
      break;
    case ClassTerm::Kind::kWord:
      hit = IsWordChar(c);
      break;
    case ClassTerm::Kind::kSpace:
      hit = IsWhitespace(c);
      break;
    case ClassTerm::Kind::kDigit:
      hit = c < 0x80 ? (c >= '0' && c <= '9') : CategoryOf(c) == Cat::kNd;
      break;
    case ClassTerm::Kind::kAnyButNewline:
      hit = c != '\n';
      break;
  }
  return hit != t.negated;
}

}  // namespace

void CharClass::Prepare() {
  for (char32_t c = 0; c < 128; ++c) {
    if (MatchesSlow(c)) ascii[c / 64] |= uint64_t{1} << (c % 64);
  }
  prepared = true;
}

bool CharClass::Matches(char32_t c) const {
  if (c < 128 && prepared) return (ascii[c / 64] >> (c % 64)) & 1;
  return MatchesSlow(c);
}

bool CharClass::MatchesSlow(char32_t c) const {
  bool hit = false;
  for (const ClassTerm& t : terms) {
    if (TermMatches(t, c) || (fold && TermMatches(t, SimpleFold(c)))) {
      hit = true;
      break;
    }
  }
  return hit != negated;
}

// A thread: where it is, where its match began, and the start of each loop iteration in flight
// (empty unless the program has slots).
struct SplitRegex::Thread {
  uint32_t pc = 0;
  size_t start = 0;
  std::vector<size_t> slots;
};

// Threads in priority order, with a once-per-step mark per instruction.
struct SplitRegex::ThreadList {
  std::vector<Thread> threads;
  std::vector<uint32_t> mark;
  uint32_t gen = 1;
  void Clear() {
    threads.clear();
    ++gen;
  }
};

// The lists of this step and the next, and AddThread's stack.
struct SplitRegex::Scratch {
  explicit Scratch(size_t program) {
    cur.mark.assign(2 * program, 0);
    next.mark.assign(2 * program, 0);
  }
  ThreadList cur, next;
  std::vector<Thread> stack;
};

bool SplitRegex::Consumes(const Inst& inst, char32_t c) const {
  if (inst.op == Op::kChar) return (inst.fold ? SimpleFold(c) : c) == inst.c;
  return inst.op == Op::kClass && classes_[inst.x].Matches(c);
}

void SplitRegex::ComputeClosures() {
  constexpr size_t kMaxTotal = size_t{1} << 20;  // entries over all closures
  closure_.assign(program_.size(), {});
  if (num_slots_ > 0) return;
  size_t total = 0;
  std::vector<uint32_t> seen(program_.size(), UINT32_MAX);
  std::vector<uint32_t> stack;
  for (uint32_t entry = 0; entry < program_.size(); ++entry) {
    const bool entered =
        entry == 0 || program_[entry - 1].op == Op::kClass || program_[entry - 1].op == Op::kChar;
    if (!entered) continue;
    std::vector<uint32_t> leaves;
    bool fixed = true;  // no assertion on the way
    stack.assign(1, entry);
    while (!stack.empty() && fixed) {
      const uint32_t pc = stack.back();
      stack.pop_back();
      if (seen[pc] == entry) continue;
      seen[pc] = entry;
      const Inst& inst = program_[pc];
      if (inst.op == Op::kJmp) {
        stack.push_back(inst.x);
      } else if (inst.op == Op::kSplit) {
        stack.push_back(inst.y);
        stack.push_back(inst.x);
      } else if (inst.op == Op::kClass || inst.op == Op::kChar || inst.op == Op::kMatch) {
        leaves.push_back(pc);
      } else {
        fixed = false;
      }
    }
    total += leaves.size();
    if (fixed && total <= kMaxTotal) closure_[entry] = std::move(leaves);
  }
}

// Adds the thread (pc, start) at text position pos to *list, following jumps, splits (x first)
// and assertions; each instruction enters a list once per step.
// AddThread by the precomputed closure of t.pc; false when it has none.
bool SplitRegex::AddFromClosure(const Thread& t, ThreadList* list) const {
  const std::vector<uint32_t>& leaves = closure_[t.pc];
  if (leaves.empty()) return false;
  for (uint32_t pc : leaves) {  // no slots in this program: the mark key is 2 * pc
    if (list->mark[2 * pc] == list->gen) continue;
    list->mark[2 * pc] = list->gen;
    list->threads.push_back({pc, t.start, {}});
  }
  return true;
}

void SplitRegex::AddThread(Thread t, const std::vector<char32_t>& text, size_t pos, Scratch* s,
                           ThreadList* list) const {
  if (AddFromClosure(t, list)) return;
  s->stack.clear();
  s->stack.push_back(std::move(t));
  while (!s->stack.empty()) {
    Thread th = std::move(s->stack.back());
    s->stack.pop_back();
    const Inst& inst = program_[th.pc];
    // Inside a loop that can match empty, a thread whose iteration is still empty and one that
    // made progress differ (at its Progress check): they are marked apart.
    const int32_t slot = slot_of_[th.pc];
    const size_t key = 2 * th.pc + (slot >= 0 && th.slots[static_cast<size_t>(slot)] == pos);
    if (list->mark[key] == list->gen) continue;
    list->mark[key] = list->gen;
    bool next = false;  // continue at pc + 1
    switch (inst.op) {
      case Op::kJmp:
        th.pc = inst.x;
        s->stack.push_back(std::move(th));
        break;
      case Op::kSplit: {
        Thread second = th;
        second.pc = inst.y;
        s->stack.push_back(std::move(second));
        th.pc = inst.x;
        s->stack.push_back(std::move(th));
        break;
      }
      case Op::kAhead:
        next = MatchesAt(inst.x, text, pos) != (inst.y == 1);
        break;
      case Op::kLineStart:
        next = pos == 0 || text[pos - 1] == '\n';
        break;
      case Op::kLineEnd:
        next = pos == text.size() || text[pos] == '\n';
        break;
      case Op::kSetSlot:
        th.slots[inst.x] = pos;
        next = true;
        break;
      case Op::kProgress:
        if (th.slots[inst.x] == pos) {
          th.pc = inst.y;
          s->stack.push_back(std::move(th));
        } else {
          next = true;
        }
        break;
      default:
        list->threads.push_back(std::move(th));
    }
    if (next) {
      ++th.pc;
      s->stack.push_back(std::move(th));
    }
  }
}

// The leftmost-first match of the program at `pc` starting at or after `from` (only at `from`
// when anchored). True with *match set when there is one.
bool SplitRegex::Run(uint32_t pc, const std::vector<char32_t>& text, size_t from, bool anchored,
                     Scratch* s, std::pair<size_t, size_t>* match) const {
  bool matched = false;
  s->cur.Clear();
  for (size_t pos = from;; ++pos) {
    if (!matched && (!anchored || pos == from)) {
      AddThread({pc, pos, std::vector<size_t>(num_slots_)}, text, pos, s, &s->cur);
    }
    if (s->cur.threads.empty() && (matched || anchored)) break;
    s->next.Clear();
    for (Thread& t : s->cur.threads) {
      const Inst& inst = program_[t.pc];
      if (inst.op == Op::kMatch) {  // every later thread has a lower priority
        matched = true;
        *match = {t.start, pos};
        break;
      }
      if (pos < text.size() && Consumes(inst, text[pos])) {
        AddThread({t.pc + 1, t.start, std::move(t.slots)}, text, pos + 1, s, &s->next);
      }
    }
    std::swap(s->cur, s->next);
    if (pos >= text.size()) break;
  }
  return matched;
}

bool SplitRegex::MatchesAt(uint32_t pc, const std::vector<char32_t>& text, size_t pos) const {
  const Inst& first = program_[pc];
  if ((first.op == Op::kClass || first.op == Op::kChar) && program_[pc + 1].op == Op::kMatch) {
    return pos < text.size() && Consumes(first, text[pos]);  // (?!\S) and the like
  }
  Scratch s(program_.size());
  std::pair<size_t, size_t> m;
  return Run(pc, text, pos, /*anchored=*/true, &s, &m);
}

std::vector<std::pair<size_t, size_t>> SplitRegex::FindAll(
    const std::vector<char32_t>& text) const {
  std::vector<std::pair<size_t, size_t>> out;
  Scratch s(program_.size());
  size_t from = 0;
  std::optional<size_t> last_match_end;
  std::pair<size_t, size_t> m;
  while (from <= text.size() && Run(0, text, from, /*anchored=*/false, &s, &m)) {
    if (m.first == m.second && last_match_end == m.second) {  // the onig crate's rule
      ++from;
      continue;
    }
    out.push_back(m);
    from = m.second;
    last_match_end = m.second;
  }
  return out;
}

}  // namespace pagedkv::model_internal
