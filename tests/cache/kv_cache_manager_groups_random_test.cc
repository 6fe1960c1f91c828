// Copyright 2026 The pagedkv Authors.
//
// Randomised differential test of KvCacheManager (several groups) against a brute-force reference
// of KV cache groups over one pool. The reference keys a cached block by (group, every token up to
// the block's end) instead of a hash, finds hits by trying every hit length from the longest down
// (the largest length at which every full-attention group holds all blocks and every
// sliding-window group holds the blocks its window needs), and models the pool by its documented
// rules: a LIFO free stack, LRU over released cached blocks, duplicates promoted when their
// holder is evicted. Admissions with prefix hits, chunked prefill, decode and frees run for
// several group layouts and seeds; after every step block tables, reference counts, free and
// evictable counts, hit lengths and NumBlocksToAllocate's totals must agree, and
// ValidateInvariants must pass.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int kBs = 4;
using Key = std::vector<TokenId>;  // group, then the tokens up to the block's end

// Every group's blocks of a hit, group 0 first.
std::vector<std::vector<BlockId>> AllGroups(const ComputedBlocks& hit) {
  std::vector<std::vector<BlockId>> out = {hit.blocks};
  out.insert(out.end(), hit.other_groups.begin(), hit.other_groups.end());
  return out;
}

class RefModel {
 public:
  RefModel(int num_blocks, std::vector<KvCacheGroupSpec> groups)
      : groups_(std::move(groups)), blocks_(num_blocks) {
    for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }

  struct Request {
    std::vector<TokenId> tokens;
    std::vector<std::vector<BlockId>> tables;
    int64_t num_tokens = 0;
    int64_t num_computed = 0;
    std::vector<int64_t> num_cached;
  };

  int64_t FirstNeeded(int g, int64_t computed) const {
    if (groups_[g].kind != KvCacheGroupKind::kSlidingWindow) return 0;
    const int64_t t = computed - groups_[g].sliding_window + 1;
    return t <= 0 ? 0 : t / kBs;
  }
  Key KeyOf(int g, const std::vector<TokenId>& tokens, int64_t i) const {
    Key k{g};
    k.insert(k.end(), tokens.begin(), tokens.begin() + (i + 1) * kBs);
    return k;
  }
  BlockId Find(const Key& key) const {
    for (size_t b = 0; b < blocks_.size(); ++b) {
      if (blocks_[b].cached && blocks_[b].key == key) return static_cast<BlockId>(b);
    }
    return kNullBlock;
  }

  // Hit length in blocks, and the blocks (null where not needed).
  std::vector<std::vector<BlockId>> Hit(const std::vector<TokenId>& tokens) const {
    const int64_t n = tokens.size();
    const int64_t max_blocks = n == 0 ? 0 : (n - 1) / kBs;
    for (int64_t len = max_blocks; len >= 0; --len) {
      std::vector<std::vector<BlockId>> out(groups_.size());
      bool ok = true;
      for (size_t g = 0; g < groups_.size() && ok; ++g) {
        out[g].assign(len, kNullBlock);
        for (int64_t i = FirstNeeded(g, len * kBs); i < len && ok; ++i) {
          out[g][i] = Find(KeyOf(g, tokens, i));
          ok = out[g][i] != kNullBlock;
        }
      }
      if (ok) return out;
    }
    return std::vector<std::vector<BlockId>>(groups_.size());
  }

  int Available() const {
    int n = static_cast<int>(free_.size());
    for (const Block& b : blocks_) n += b.cached && b.ref == 0;
    return n;
  }
  int NumEvictable() const { return Available() - static_cast<int>(free_.size()); }
  int NumFree() const { return static_cast<int>(free_.size()); }
  int Ref(BlockId b) const { return blocks_[b].ref; }

  // Returns false (nothing changed) when the pool is short.
  bool Allocate(RequestId id, const std::vector<TokenId>& tokens, int64_t num_new,
                const std::vector<std::vector<BlockId>>& hit) {
    const bool is_new = !requests_.contains(id);
    Request fresh{.tokens = tokens};
    Request& r = is_new ? fresh : requests_[id];
    r.tokens = tokens;
    const int64_t computed = is_new ? (hit.empty() ? 0 : hit[0].size() * kBs) : r.num_tokens;
    const int64_t per_group = (computed + num_new + kBs - 1) / kBs - (computed + kBs - 1) / kBs;
    int need = static_cast<int>(per_group * groups_.size());
    int releasable = 0;
    last_released_ = 0;
    if (is_new) {
      for (const auto& list : hit) {
        for (BlockId b : list) need += b != kNullBlock && blocks_[b].ref == 0;
      }
    } else {
      for (size_t g = 0; g < groups_.size(); ++g) {
        for (int64_t i = FirstNeeded(g, computed) - 1; i >= 0 && r.tables[g][i] != kNullBlock;
             --i) {
          releasable += blocks_[r.tables[g][i]].ref == 1;
          ++last_released_;
        }
      }
    }
    last_need_ = need;
    if (need > Available() + releasable) return false;
    if (is_new) {
      r.tables = hit.empty() ? std::vector<std::vector<BlockId>>(groups_.size()) : hit;
      r.num_cached.assign(groups_.size(), computed / kBs);
      for (const auto& list : r.tables) {
        for (BlockId b : list) {
          if (b != kNullBlock) Pin(b);
        }
      }
    } else {
      for (size_t g = 0; g < groups_.size(); ++g) {
        for (int64_t i = FirstNeeded(g, computed) - 1; i >= 0 && r.tables[g][i] != kNullBlock;
             --i) {
          Unpin(r.tables[g][i]);
          r.tables[g][i] = kNullBlock;
        }
      }
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (int64_t k = 0; k < per_group; ++k) r.tables[g].push_back(TakeBlock());
    }
    r.num_tokens = computed + num_new;
    r.num_computed = computed;
    CacheFull(r);
    if (is_new) requests_[id] = std::move(fresh);
    return true;
  }

  void Free(RequestId id) {
    for (const auto& table : requests_[id].tables) {
      for (auto b = table.rbegin(); b != table.rend(); ++b) {
        if (*b != kNullBlock) Unpin(*b);
      }
    }
    requests_.erase(id);
  }

  const Request& request(RequestId id) const { return requests_.at(id); }
  // The latest Allocate's blocks to take and to release (also when it refused).
  int last_need() const { return last_need_; }
  int last_released() const { return last_released_; }

 private:
  struct Block {
    int ref = 0;
    bool cached = false;
    Key key;
    int64_t released_at = 0;
    std::vector<BlockId> dups;  // holder: its duplicates, earliest first
    BlockId dup_of = kNullBlock;
  };

  void Pin(BlockId b) { ++blocks_[b].ref; }
  void Unpin(BlockId b) {
    Block& m = blocks_[b];
    if (--m.ref > 0) return;
    if (m.cached) {
      m.released_at = ++clock_;
      return;
    }
    if (m.dup_of != kNullBlock) {
      auto& d = blocks_[m.dup_of].dups;
      d.erase(std::find(d.begin(), d.end(), b));
      m.dup_of = kNullBlock;
    }
    free_.push_back(b);
  }
  BlockId TakeBlock() {
    BlockId b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = kNullBlock;
      for (size_t i = 0; i < blocks_.size(); ++i) {
        const Block& m = blocks_[i];
        if (m.cached && m.ref == 0 && (b == kNullBlock || m.released_at < blocks_[b].released_at)) {
          b = static_cast<BlockId>(i);
        }
      }
      Evict(b);
    }
    blocks_[b].ref = 1;
    return b;
  }
  void Evict(BlockId b) {
    Block& m = blocks_[b];
    m.cached = false;
    if (m.dups.empty()) return;
    const BlockId heir = m.dups.front();
    Block& h = blocks_[heir];
    h.cached = true;
    h.key = m.key;
    h.dup_of = kNullBlock;
    h.dups.assign(m.dups.begin() + 1, m.dups.end());
    for (BlockId d : h.dups) blocks_[d].dup_of = heir;
    m.dups.clear();
  }
  void CacheFull(Request& r) {
    const int64_t full = r.num_tokens / kBs;
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (int64_t i = r.num_cached[g]; i < full; ++i) {
        const BlockId b = r.tables[g][i];
        if (b == kNullBlock) continue;
        const Key key = KeyOf(g, r.tokens, i);
        const BlockId holder = Find(key);
        if (holder == kNullBlock) {
          blocks_[b].cached = true;
          blocks_[b].key = key;
        } else {
          blocks_[holder].dups.push_back(b);
          blocks_[b].dup_of = holder;
        }
      }
      r.num_cached[g] = std::max(r.num_cached[g], full);
    }
  }

  std::vector<KvCacheGroupSpec> groups_;
  std::vector<Block> blocks_;
  std::vector<BlockId> free_;
  std::map<RequestId, Request> requests_;
  int64_t clock_ = 0;
  int last_need_ = 0;
  int last_released_ = 0;
};

struct Layout {
  const char* name;
  std::vector<KvCacheGroupSpec> groups;
  int num_blocks;
  bool events;
};

std::vector<Layout> Layouts() {
  const KvCacheGroupSpec full{.kind = KvCacheGroupKind::kFullAttention};
  auto window = [](int w) {
    return KvCacheGroupSpec{.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = w};
  };
  return {{"full_w5", {full, window(5)}, 24, false},
          {"full_w8_full", {full, window(8), full}, 36, true},
          {"w6_full_w13", {window(6), full, window(13)}, 30, false},
          {"full_w1", {full, window(1)}, 20, true}};
}

class Driver {
 public:
  Driver(const Layout& layout, uint32_t seed)
      : rng_(seed), num_blocks_(layout.num_blocks), ref_(layout.num_blocks, layout.groups) {
    manager_ = KvCacheManager::Create({.num_blocks = layout.num_blocks,
                                       .block_size = kBs,
                                       .collect_event_batches = layout.events,
                                       .groups = layout.groups})
                   .value();
    for (auto& base : bases_) {
      base.resize(48);
      for (TokenId& t : base) t = static_cast<TokenId>(rng_() % 3);
    }
  }

  void Step() {
    const int op = static_cast<int>(rng_() % 10);
    if (op < 3 || live_.empty()) {
      Admit();
    } else if (op < 8) {
      Advance(live_[rng_() % live_.size()]);
    } else {
      const size_t k = rng_() % live_.size();
      ASSERT_TRUE(manager_->Free(live_[k]).ok());
      ref_.Free(live_[k]);
      requests_.erase(live_[k]);
      live_.erase(live_.begin() + k);
    }
  }

  // What the run exercised: hit tokens, evictions, duplicates promoted, refused allocations.
  CacheStats stats() const { return manager_->stats(); }
  int refused() const { return refused_; }

  void Check() const {
    ASSERT_TRUE(manager_->ValidateInvariants().ok()) << manager_->ValidateInvariants();
    ASSERT_EQ(manager_->pool().NumFreeBlocks(), ref_.NumFree());
    ASSERT_EQ(manager_->pool().NumEvictableBlocks(), ref_.NumEvictable());
    for (BlockId b = 0; b < manager_->pool().num_blocks(); ++b) {
      ASSERT_EQ(manager_->pool().RefCount(b), ref_.Ref(b)) << "block " << b;
    }
    for (const RequestId id : live_) {
      for (int32_t g = 0; g < manager_->num_groups(); ++g) {
        const auto table = manager_->GetBlockTable(id, g).value();
        ASSERT_EQ(std::vector<BlockId>(table.begin(), table.end()), ref_.request(id).tables[g])
            << "request " << id << " group " << g;
      }
    }
  }

 private:
  void Admit() {
    const RequestId id = next_id_++;
    std::vector<TokenId> prompt = bases_[rng_() % 3];
    prompt.resize(1 + rng_() % prompt.size());
    if (rng_() % 3 == 0) prompt[rng_() % prompt.size()] = static_cast<TokenId>(3 + rng_() % 2);
    CacheRequest r = manager_->NewRequest(id, prompt).value();
    const ComputedBlocks hit = manager_->GetComputedBlocks(r).value();
    const auto want = ref_.Hit(prompt);
    ASSERT_EQ(AllGroups(hit), want) << "hit of request " << id;
    const int64_t left = r.num_tokens() - hit.num_computed_tokens;
    const int64_t chunk = 1 + static_cast<int64_t>(rng_() % left);
    const AllocationPlan plan = manager_->PlanAllocation(r, chunk, hit).value();
    const absl::Status s = manager_->AllocateSlots(r, chunk, hit);
    const bool ref_ok = ref_.Allocate(id, prompt, chunk, want);
    ASSERT_EQ(s.ok(), ref_ok) << s;
    ASSERT_EQ(plan.total, std::min(ref_.last_need(), num_blocks_ + 1));
    ASSERT_EQ(plan.total_released, ref_.last_released());
    if (!s.ok()) {
      ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
      ++refused_;
      return;
    }
    live_.push_back(id);
    requests_.emplace(id, std::move(r));
  }

  void Advance(RequestId id) {
    CacheRequest& r = requests_.at(id);
    const int64_t have = manager_->NumAllocatedTokens(id).value();
    int64_t chunk = 1;
    if (have < r.num_tokens()) {
      chunk = 1 + static_cast<int64_t>(rng_() % (r.num_tokens() - have));
    } else {
      ASSERT_TRUE(r.AppendToken(static_cast<TokenId>(rng_() % 3)).ok());
    }
    const std::vector<TokenId> tokens(r.tokens().begin(), r.tokens().end());
    const AllocationPlan plan = manager_->PlanAllocation(r, chunk).value();
    const absl::Status s = manager_->AllocateSlots(r, chunk);
    ASSERT_EQ(s.ok(), ref_.Allocate(id, tokens, chunk, {})) << s;
    ASSERT_EQ(plan.total, std::min(ref_.last_need(), num_blocks_ + 1));
    ASSERT_EQ(plan.total_released, ref_.last_released());
    if (!s.ok()) {
      ASSERT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
      ++refused_;
    }
  }

  std::mt19937 rng_;
  int num_blocks_;
  RefModel ref_;
  std::unique_ptr<KvCacheManager> manager_;
  std::vector<TokenId> bases_[3];
  std::map<RequestId, CacheRequest> requests_;
  std::vector<RequestId> live_;
  RequestId next_id_ = 1;
  int refused_ = 0;
};

TEST(KvCacheManagerGroupsRandomTest, MatchesReference) {
  int64_t promoted = 0;
  for (const Layout& layout : Layouts()) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE(absl::StrCat(layout.name, " seed ", seed));
      Driver driver(layout, seed);
      for (int step = 0; step < 1500; ++step) {
        SCOPED_TRACE(absl::StrCat("step ", step));
        ASSERT_NO_FATAL_FAILURE(driver.Step());
        ASSERT_NO_FATAL_FAILURE(driver.Check());
      }
      // Every run must reach the interesting states, or it proves little.
      EXPECT_GT(driver.stats().hit_tokens, 0);
      EXPECT_GT(driver.stats().evictions, 0);
      EXPECT_GT(driver.refused(), 0);
      promoted += driver.stats().promoted_duplicates;
    }
  }
  EXPECT_GT(promoted, 0);
}

}  // namespace
}  // namespace pagedkv
