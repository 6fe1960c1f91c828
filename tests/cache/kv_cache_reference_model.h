// Copyright 2026 The pagedkv Authors.
//
// The brute-force reference model of kv_cache_manager_random_test.cc: a block pool and a cache
// manager written with linear scans and timestamps instead of hash maps and lists, following the
// documented rules of BlockPool and KvCacheManager (prefix hits, verification and chain links,
// eviction order per policy, duplicates and their promotion, priorities and the cap, lookahead
// slots and truncation). It reports the status code each real call must return and keeps the
// state the test compares after every step.
#ifndef PAGEDKV_TESTS_CACHE_KV_CACHE_REFERENCE_MODEL_H_
#define PAGEDKV_TESTS_CACHE_KV_CACHE_REFERENCE_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv::testing {

class RefPool {
 public:
  enum class State { kFree, kUsed, kEvictable };
  struct Block {
    State state = State::kFree;
    int ref = 0;
    bool cached = false;
    BlockHash hash, parent, extra;
    std::vector<TokenId> tokens;         // stored tokens (empty: none)
    uint64_t link = 0, parent_link = 0;  // content identity, and the parent's (0: none)
    uint32_t gen = 0;
    uint64_t release_seq = 0, insert_seq = 0, freq = 0;
    int dup_of = -1;       // the cached block this used one duplicates, or -1
    uint64_t dup_seq = 0;  // when it was recorded
    int level = kDefaultCachePriority;
  };

  RefPool(int n, int bs, bool store, std::string policy, bool priorities)
      : blocks_(n),
        bs_(bs),
        store_(store),
        policy_(std::move(policy)),
        priorities_(priorities),
        max_high_(n / 2) {}

  // The level a block asking for `level` gets: above the default only under the cap (the
  // blocks counted exclude `self`).
  int Admit(int level, int self = -1) const {
    if (!priorities_) return kDefaultCachePriority;
    int high = 0;
    for (int b = 0; b < Size(); ++b) {
      high += b != self && blocks_[b].cached && blocks_[b].level > kDefaultCachePriority;
    }
    return level > kDefaultCachePriority && high >= max_high_ ? kDefaultCachePriority : level;
  }
  // A hit by a request of priority `p`: up only (moved like a fresh insert at the new level).
  void Raise(int b, const CachePriority& p) {
    Block& x = blocks_[b];
    if (!priorities_ || !x.cached || p.priority <= x.level) return;
    const int level = Admit(p.priority, b);
    if (level <= x.level) return;
    x.level = level;
    x.freq = 1;
    x.insert_seq = ++seq_;
  }

  int Find(const BlockHash& h) const {
    for (int b = 0; b < Size(); ++b) {
      if (blocks_[b].cached && blocks_[b].hash == h) return b;
    }
    return -1;
  }
  int Count(State s) const {
    return static_cast<int>(std::count_if(blocks_.begin(), blocks_.end(),
                                          [s](const Block& b) { return b.state == s; }));
  }
  int Available() const { return Count(State::kFree) + Count(State::kEvictable); }
  int Size() const { return static_cast<int>(blocks_.size()); }
  const Block& at(int b) const { return blocks_[b]; }

  void Pin(int b) {
    Block& x = blocks_[b];
    if (x.state == State::kEvictable) x.state = State::kUsed;
    ++x.ref;
    if (x.cached) ++x.freq;
  }
  void Unpin(int b) {
    Block& x = blocks_[b];
    if (--x.ref > 0) return;
    if (x.cached && !Reachable(b)) {  // never kept: dropped as unreachable
      x.cached = false;
      x.state = State::kFree;
      ++evictions;
      ForgetDuplicatesOf(b);
    } else if (x.cached) {
      x.state = State::kEvictable;
      x.release_seq = ++seq_;
    } else {
      x.state = State::kFree;
      x.dup_of = -1;
    }
  }
  int Allocate() {
    int pick = -1;
    for (int b = 0; b < Size() && pick < 0; ++b) {
      if (blocks_[b].state == State::kFree) pick = b;
    }
    if (pick < 0) {
      for (int b = 0; b < Size(); ++b) {
        if (blocks_[b].state != State::kEvictable) continue;
        if (pick < 0 || VictimKey(b) < VictimKey(pick)) pick = b;
      }
      blocks_[pick].cached = false;
      ++evictions;
      evicted_.push_back(pick);  // promoted by FinishAllocation, as the pool's batch does
    }
    blocks_[pick].state = State::kUsed;
    blocks_[pick].ref = 1;
    return pick;
  }
  bool Insert(int b, const BlockHash& h, const BlockHash& parent, std::span<const TokenId> tokens,
              int parent_block, const BlockHash& extra, const CachePriority& priority = {}) {
    if (Find(h) >= 0) return false;
    blocks_[b].level = Admit(priority.priority);
    EXPECT_TRUE(parent_block < 0 || blocks_[parent_block].cached) << "parent must be cached";
    Block& x = blocks_[b];
    x.cached = true;
    x.hash = h;
    x.parent = parent;
    x.extra = extra;
    x.tokens = store_ ? std::vector<TokenId>(tokens.begin(), tokens.end()) : std::vector<TokenId>{};
    x.link = ++link_seq_;
    x.parent_link = parent_block < 0 ? 0 : blocks_[parent_block].link;
    x.dup_of = -1;
    ++x.gen;
    x.freq = 1;
    x.insert_seq = ++seq_;
    ++stored;
    return true;
  }
  // The documented duplicate rule: recorded when a block with the same hash, parent hash, extra
  // digest and (when both have them) tokens is cached.
  void AddDuplicate(int b, const BlockHash& h, const BlockHash& parent,
                    std::span<const TokenId> tokens, const BlockHash& extra) {
    const int holder = Find(h);
    if (holder < 0) return;
    const Block& o = blocks_[holder];
    if (o.parent != parent || o.extra != extra) return;
    if (!o.tokens.empty() && !tokens.empty() && !TokensMatch(holder, tokens)) return;
    blocks_[b].dup_of = holder;
    blocks_[b].dup_seq = ++seq_;
  }
  // After a batch of Allocate calls: the victims' duplicates take their places, in order.
  void FinishAllocation() {
    for (int old : evicted_) Promote(old);
    evicted_.clear();
    DropUnreachable();
  }
  // The documented chain rule: a cached block is reachable when it has no parent block, or its
  // parent block (by link) is cached and reachable. Unreachable evictable blocks are dropped.
  bool Reachable(int b) const {
    for (int depth = 0; depth <= Size(); ++depth) {
      const Block& x = blocks_[b];
      if (!x.cached) return false;
      if (x.parent_link == 0) return true;
      int p = -1;
      for (int c = 0; c < Size() && p < 0; ++c) {
        if (blocks_[c].cached && blocks_[c].link == x.parent_link) p = c;
      }
      if (p < 0) return false;
      b = p;
    }
    return false;
  }
  void DropUnreachable() {
    for (bool again = true; again;) {
      again = false;
      for (int b = 0; b < Size(); ++b) {
        if (blocks_[b].state != State::kEvictable || !blocks_[b].cached || Reachable(b)) continue;
        blocks_[b].cached = false;
        blocks_[b].state = State::kFree;
        ForgetDuplicatesOf(b);
        ++evictions;
        again = true;
      }
    }
  }
  void ForgetDuplicatesOf(int b) {
    for (Block& other : blocks_) {
      if (other.dup_of == b) other.dup_of = -1;
    }
  }
  // Evicted `old`'s earliest duplicate takes its place, with its content identity.
  void Promote(int old) {
    int x = -1;
    for (int b = 0; b < Size(); ++b) {
      if (blocks_[b].dup_of == old && (x < 0 || blocks_[b].dup_seq < blocks_[x].dup_seq)) x = b;
    }
    if (x < 0) return;
    const Block& o = blocks_[old];
    Block& d = blocks_[x];
    d.level = Admit(o.level);  // before d counts as cached
    d.cached = true;
    d.hash = o.hash;
    d.parent = o.parent;
    d.extra = o.extra;
    d.tokens = o.tokens;
    d.link = o.link;
    d.parent_link = o.parent_link;
    d.dup_of = -1;
    ++d.gen;
    d.freq = 1;
    d.insert_seq = ++seq_;
    ++promoted;
    ++stored;
    for (Block& other : blocks_) {
      if (other.dup_of == old) other.dup_of = x;
    }
  }
  void Uncache(int b) {
    if (blocks_[b].cached) ++evictions;  // every block leaving the index, but for a reset
    Forget(b);
    DropUnreachable();
  }
  void Forget(int b) {
    blocks_[b].cached = false;
    if (blocks_[b].state == State::kEvictable) blocks_[b].state = State::kFree;
    ForgetDuplicatesOf(b);
  }
  void DropDuplicate(int b) { blocks_[b].dup_of = -1; }
  int NumDuplicates() const {
    return static_cast<int>(std::count_if(blocks_.begin(), blocks_.end(),
                                          [](const Block& b) { return b.dup_of >= 0; }));
  }
  void Reset() {
    for (int b = 0; b < Size(); ++b) Forget(b);
  }
  bool Linked(int child, int parent) const {
    const Block& c = blocks_[child];
    if (!c.cached) return false;
    if (parent < 0) return c.parent_link == 0;
    return blocks_[parent].cached && c.parent_link == blocks_[parent].link;
  }
  bool TokensMatch(int b, std::span<const TokenId> t) const {
    const Block& x = blocks_[b];
    return x.tokens.empty() || std::equal(t.begin(), t.end(), x.tokens.begin(), x.tokens.end());
  }

  int64_t evictions = 0, stored = 0, promoted = 0;

 private:
  // Lowest level first, then the policy's order.
  std::tuple<int, uint64_t, uint64_t> VictimKey(int b) const {
    const Block& x = blocks_[b];
    if (policy_ == "lfu") return {x.level, x.freq, x.release_seq};
    if (policy_ == "fifo") return {x.level, x.insert_seq, 0};
    return {x.level, x.release_seq, 0};
  }

  std::vector<Block> blocks_;
  int bs_;
  bool store_;
  std::string policy_;
  bool priorities_;
  int max_high_;
  uint64_t seq_ = 0;
  uint64_t link_seq_ = 0;
  std::vector<int> evicted_;
};

class RefManager {
 public:
  struct Req {
    std::vector<int> table;
    int64_t num_tokens = 0;
    int64_t lookahead = 0;  // slots reserved past num_tokens, never cached
    int64_t num_cached = 0;
    int canon = -1;
    uint32_t canon_gen = 0;
    bool broken = false;
  };

  RefManager(int n, int bs, bool verify, std::string policy, bool priorities)
      : pool(n, bs, verify, std::move(policy), priorities), bs_(bs), verify_(verify) {}

  bool Verify(int b, const CacheRequest& r, int64_t i, int prev) const {
    const auto& x = pool.at(b);
    return x.cached && x.parent == r.ParentHashOf(i) && pool.TokensMatch(b, r.BlockTokens(i)) &&
           x.extra == r.BlockExtraDigest(i) && pool.Linked(b, prev);
  }

  std::vector<int> Lookup(const CacheRequest& r) {
    std::vector<int> hit;
    if (r.num_tokens() == 0) return hit;
    const int64_t max_blocks = (r.num_tokens() - 1) / bs_;
    int prev = -1;
    for (int64_t i = 0; i < max_blocks; ++i) {
      const int b = pool.Find(r.block_hashes()[i]);
      if (b < 0) break;
      if (verify_ && !Verify(b, r, i, prev)) {
        ++verification_failures;
        break;
      }
      hit.push_back(b);
      prev = b;
    }
    hit_tokens += static_cast<int64_t>(hit.size()) * bs_;
    return hit;
  }

  // Returns the status code AllocateSlots must produce.
  absl::StatusCode Allocate(const CacheRequest& r, int64_t n, const std::vector<int>& hit,
                            int64_t lookahead = 0) {
    const bool is_new = !reqs.contains(r.id());
    if (n < 0 || lookahead < 0 || (!is_new && !hit.empty())) {
      return absl::StatusCode::kInvalidArgument;
    }
    const int64_t have = is_new ? static_cast<int64_t>(hit.size()) * bs_ : reqs[r.id()].num_tokens;
    if (have + n > r.num_tokens()) return absl::StatusCode::kInvalidArgument;
    const int64_t blocks = (have + n + lookahead + bs_ - 1) / bs_;
    const int64_t held = is_new ? static_cast<int64_t>(hit.size()) : reqs[r.id()].table.size();
    const int64_t need = std::max<int64_t>(0, blocks - held);
    int64_t evictable_hits = 0;
    for (int b : hit) evictable_hits += pool.at(b).ref == 0;
    if (need + evictable_hits > pool.Available()) {
      if (is_new) reqs.erase(r.id());
      return absl::StatusCode::kResourceExhausted;
    }
    Req& q = reqs[r.id()];
    if (is_new) {
      for (int b : hit) {
        pool.Pin(b);
        pool.Raise(b, r.BlockPriorityOf(static_cast<int64_t>(q.table.size())));
        q.table.push_back(b);
      }
      q.num_cached = static_cast<int64_t>(hit.size());
      if (!hit.empty()) {
        q.canon = hit.back();
        q.canon_gen = pool.at(q.canon).gen;
      }
    }
    for (int64_t i = 0; i < need; ++i) q.table.push_back(pool.Allocate());
    pool.FinishAllocation();
    while (static_cast<int64_t>(q.table.size()) > blocks) {
      pool.Unpin(q.table.back());
      q.table.pop_back();
    }
    q.num_tokens = have + n;
    q.lookahead = lookahead;
    CacheFull(r, q);
    return absl::StatusCode::kOk;
  }

  // The status TruncateRequest(r, n) must produce; applies it to the model (not to r).
  absl::StatusCode Truncate(const CacheRequest& r, int64_t n) {
    auto it = reqs.find(r.id());
    if (it == reqs.end()) return absl::StatusCode::kNotFound;
    if (n < 0 || n > r.num_tokens()) return absl::StatusCode::kInvalidArgument;
    Req& q = it->second;
    const int64_t kept = std::min(q.num_tokens, n);
    const size_t keep = static_cast<size_t>((kept + bs_ - 1) / bs_);
    const size_t dirty = static_cast<size_t>(n / bs_);
    if (dirty < keep && pool.at(q.table[dirty]).ref > 1) {
      return absl::StatusCode::kFailedPrecondition;
    }
    for (size_t i = dirty; i < q.table.size(); ++i) {
      if (pool.at(q.table[i]).cached && pool.at(q.table[i]).ref == 1) pool.Uncache(q.table[i]);
      pool.DropDuplicate(q.table[i]);
    }
    while (q.table.size() > keep) {
      pool.Unpin(q.table.back());
      q.table.pop_back();
    }
    q.num_tokens = kept;
    q.lookahead = 0;
    if (q.num_cached > static_cast<int64_t>(dirty)) {
      q.num_cached = static_cast<int64_t>(dirty);
      q.canon = -1;
      if (q.num_cached > 0 && verify_) {
        const int64_t i = q.num_cached - 1;
        const int holder = pool.Find(r.block_hashes()[i]);
        const int prev = i > 0 ? pool.Find(r.block_hashes()[i - 1]) : -1;
        if (holder < 0 || !Verify(holder, r, i, prev)) {
          q.broken = true;
        } else {
          q.canon = holder;
          q.canon_gen = pool.at(holder).gen;
        }
      }
    }
    return absl::StatusCode::kOk;
  }

  void CacheFull(const CacheRequest& r, Req& q) {
    const int64_t full = q.num_tokens / bs_;
    for (int64_t i = q.num_cached; i < full; ++i) {
      const int b = q.table[i];
      if (!verify_) {
        if (!pool.Insert(b, r.block_hashes()[i], r.ParentHashOf(i), r.BlockTokens(i), -1,
                         r.BlockExtraDigest(i), r.BlockPriorityOf(i))) {
          pool.AddDuplicate(b, r.block_hashes()[i], r.ParentHashOf(i), r.BlockTokens(i),
                            r.BlockExtraDigest(i));
        }
        continue;
      }
      if (q.broken) continue;
      int prev = -1;
      if (i > 0) {
        const bool stale =
            q.canon < 0 || !pool.at(q.canon).cached || pool.at(q.canon).gen != q.canon_gen;
        if (stale && pool.Find(r.block_hashes()[i - 1]) == q.table[i - 1]) {
          q.canon = q.table[i - 1];  // its own copy was promoted in place of the evicted one
          q.canon_gen = pool.at(q.canon).gen;
        }
        prev = q.canon;
        if (prev < 0 || !pool.at(prev).cached || pool.at(prev).gen != q.canon_gen) {
          q.broken = true;
          continue;
        }
      }
      int canon = b;
      const int holder = pool.Find(r.block_hashes()[i]);
      if (holder >= 0 && holder == prev) {
        q.broken = true;
        continue;
      }
      if (holder >= 0) {
        if (Verify(holder, r, i, prev)) {
          canon = holder;
          pool.AddDuplicate(b, r.block_hashes()[i], r.ParentHashOf(i), r.BlockTokens(i),
                            r.BlockExtraDigest(i));
        } else {
          ++replaced;
          pool.Uncache(holder);
        }
      }
      if (canon == b) {
        pool.Insert(b, r.block_hashes()[i], r.ParentHashOf(i), r.BlockTokens(i), prev,
                    r.BlockExtraDigest(i), r.BlockPriorityOf(i));
      }
      q.canon = canon;
      q.canon_gen = pool.at(canon).gen;
    }
    q.num_cached = std::max(q.num_cached, full);
  }

  bool Free(RequestId id) {
    auto it = reqs.find(id);
    if (it == reqs.end()) return false;
    for (auto b = it->second.table.rbegin(); b != it->second.table.rend(); ++b) pool.Unpin(*b);
    reqs.erase(it);
    return true;
  }

  RefPool pool;
  std::map<RequestId, Req> reqs;
  int64_t hit_tokens = 0, verification_failures = 0, replaced = 0;

 private:
  int bs_;
  bool verify_;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_CACHE_KV_CACHE_REFERENCE_MODEL_H_
