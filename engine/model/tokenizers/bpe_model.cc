// Copyright 2026 The pagedkv Authors.
#include "engine/model/tokenizers/bpe_model.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/model/tokenizers/unicode_categories.h"

namespace pagedkv::model_internal {

absl::StatusOr<BpeModel> BpeModel::Create(
    absl::flat_hash_map<std::string, TokenId> vocab,
    const std::vector<std::pair<std::string, std::string>>& merges,
    const BpeModelOptions& options) {
  BpeModel m;
  m.vocab_ = std::move(vocab);
  m.options_ = options;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    auto ia = m.vocab_.find(a), ib = m.vocab_.find(b), ic = m.vocab_.find(a + b);
    if (ia == m.vocab_.end() || ib == m.vocab_.end() || ic == m.vocab_.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("BPE merge %d (\"%s\" \"%s\"): the vocabulary lacks \"%s\"", r, a, b,
                          ia == m.vocab_.end()   ? a
                          : ib == m.vocab_.end() ? b
                                                 : a + b));
    }
    // The first (lowest-rank) listing of a pair wins, as in tokenizers.
    m.merges_.try_emplace(PairKey(ia->second, ib->second),
                          Merge{static_cast<int32_t>(r), ic->second});
  }
  if (options.unk_id.has_value()) {
    bool found = false;
    for (const auto& [token, id] : m.vocab_) found = found || id == *options.unk_id;
    if (!found) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "BPE: the unknown token id %d is not in the vocabulary", *options.unk_id));
    }
  }
  m.byte_ids_.assign(256, -1);
  for (int b = 0; b < 256 && options.byte_fallback; ++b) {
    auto it = m.vocab_.find(absl::StrFormat("<0x%02X>", b));
    if (it != m.vocab_.end()) m.byte_ids_[static_cast<size_t>(b)] = it->second;
  }
  return m;
}

std::optional<TokenId> BpeModel::Find(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<BpeModel::Symbol> BpeModel::InitialSymbols(std::string_view word) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto push = [&](TokenId id, size_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back(
        Symbol{.id = id, .prev = n - 1, .next = -1, .len = static_cast<int32_t>(len)});
    if (n > 0) symbols[static_cast<size_t>(n - 1)].next = n;
  };
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t len = CodePointLength(word, i);
    const std::string_view ch = word.substr(i, len);
    i += len;
    if (auto it = vocab_.find(absl::string_view(ch.data(), ch.size())); it != vocab_.end()) {
      push(it->second, len);
      last_unk = false;
      continue;
    }
    bool bytes_ok = options_.byte_fallback;
    for (char c : ch) bytes_ok = bytes_ok && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (bytes_ok) {
      for (char c : ch) push(byte_ids_[static_cast<uint8_t>(c)], 1);
      last_unk = false;
    } else if (options_.unk_id.has_value()) {
      if (last_unk && options_.fuse_unk) {
        symbols.back().len += static_cast<int32_t>(len);
      } else {
        push(*options_.unk_id, len);
      }
      last_unk = true;
    }
  }
  return symbols;
}

void BpeModel::MergeAll(std::vector<Symbol>* symbols) const {
  // A candidate merge: the pair starting at symbol `pos` has merge rank `rank` and yields
  // `new_id`. Ordered by (rank, pos), smallest first, in a 16-byte entry (rank and pos in one key).
  // On pop it applies when the pair now at `pos` still yields new_id (tokenizers' rule).
  struct Candidate {
    uint64_t key;  // rank << 32 | pos
    TokenId new_id;
    bool operator>(const Candidate& o) const { return key > o.key; }
  };
  std::vector<Symbol>& s = *symbols;
  std::vector<Candidate> heap;
  heap.reserve(s.size());
  auto candidate = [&](int32_t left, Candidate* out) {
    const Symbol& l = s[static_cast<size_t>(left)];
    if (l.next < 0) return false;
    auto it = merges_.find(PairKey(l.id, s[static_cast<size_t>(l.next)].id));
    if (it == merges_.end()) return false;
    *out = {(static_cast<uint64_t>(it->second.rank) << 32) | static_cast<uint32_t>(left),
            it->second.new_id};
    return true;
  };
  Candidate c;
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.size()); ++i) {
    if (candidate(i, &c)) heap.push_back(c);
  }
  const std::greater<Candidate> after;
  std::make_heap(heap.begin(), heap.end(), after);
  auto offer = [&](int32_t left) {
    if (!candidate(left, &c)) return;
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), after);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    const Candidate top = heap.back();
    heap.pop_back();
    const auto pos = static_cast<int32_t>(top.key & 0xffffffffu);
    Symbol& l = s[static_cast<size_t>(pos)];
    if (l.len == 0 || l.next < 0) continue;  // merged away, or now last
    Symbol& r = s[static_cast<size_t>(l.next)];
    auto it = merges_.find(PairKey(l.id, r.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale
    l.id = top.new_id;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) s[static_cast<size_t>(l.next)].prev = pos;
    if (l.prev >= 0) offer(l.prev);
    offer(pos);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto it = vocab_.find(absl::string_view(word.data(), word.size())); it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols = InitialSymbols(word);
  MergeAll(&symbols);
  for (const Symbol& sym : symbols) {
    if (sym.len > 0) out->push_back(sym.id);
  }
}

}  // namespace pagedkv::model_internal
