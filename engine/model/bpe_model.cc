// Copyright 2026 The pagedkv Authors.
#include "engine/model/bpe_model.h"

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/model/unicode_categories.h"

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
  // A candidate is still valid when both symbols are unchanged neighbours (so no second merge
  // lookup is needed on pop).
  struct Candidate {
    int32_t rank, pos, right;
    TokenId left_id, right_id, new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Symbol>& s = *symbols;
  std::vector<Candidate> storage;
  storage.reserve(s.size());
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue(
      std::greater<Candidate>(), std::move(storage));
  auto offer = [&](int32_t left) {
    const Symbol& l = s[static_cast<size_t>(left)];
    if (l.next < 0) return;
    const TokenId right_id = s[static_cast<size_t>(l.next)].id;
    auto it = merges_.find(PairKey(l.id, right_id));
    if (it != merges_.end()) {
      queue.push({it->second.rank, left, l.next, l.id, right_id, it->second.new_id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(s.size()); ++i) offer(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& l = s[static_cast<size_t>(top.pos)];
    if (l.len == 0 || l.next != top.right || l.id != top.left_id) continue;  // stale
    Symbol& r = s[static_cast<size_t>(l.next)];
    if (r.id != top.right_id) continue;  // stale
    l.id = top.new_id;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) s[static_cast<size_t>(l.next)].prev = top.pos;
    if (l.prev >= 0) offer(l.prev);
    offer(top.pos);
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
