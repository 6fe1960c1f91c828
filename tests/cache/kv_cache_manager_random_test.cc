// Copyright 2026 The pagedkv Authors.
//
// Randomised differential test of KvCacheManager (and the BlockPool and eviction policies under
// it) against a brute-force reference model: linear scans instead of hash maps, timestamps
// instead of lists, and the same documented rules. Thousands of random operations (admit with
// prefix hits, chunked growth, decode, free, double free, reset, invalid calls, salts, adapters,
// multimodal keys, lookahead slots for draft tokens, truncation of rejected tokens) run for every
// policy, with and without token verification, with XXH3 and with a
// 2-bit hasher that forces collisions. After every step an invariant checker compares the two
// models and checks the real one on its own: reference counts equal block-table entries,
// free + evictable + used = total, every indexed hash maps to a block holding exactly the tokens
// (and hash) it was computed for, the evictable set is exactly the zero-count cached blocks, and
// (with verification on, or with a real hash) every prefix hit holds the request's own context.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "tests/cache/kv_cache_reference_model.h"
#include "tests/cache/test_hashers.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RefManager;
using ::pagedkv::testing::RefPool;

// ---- Driver -------------------------------------------------------------------------------------

struct Config {
  std::string policy;
  bool verify;
  int hash_bits;            // 0: XXH3-128, else a colliding hasher with that many bits
  bool priorities = false;  // random request priorities and system-prompt spans
};

std::string ConfigName(const Config& c) {
  return absl::StrCat(c.policy, c.verify ? "_verify" : "_noverify",
                      c.hash_bits == 0 ? "_xxh3" : absl::StrCat("_bits", c.hash_bits),
                      c.priorities ? "_priorities" : "");
}

class Driver {
 public:
  static constexpr int kBs = 4;
  static constexpr int kBlocks = 24;
  static constexpr int kVocab = 5;

  Driver(const Config& c, uint32_t seed)
      : config_(c), rng_(seed), ref_(kBlocks, kBs, c.verify, c.policy, c.priorities) {
    KvCacheManagerOptions o{.num_blocks = kBlocks,
                            .block_size = kBs,
                            .verify_tokens = c.verify,
                            .eviction_policy = c.policy,
                            .vocab_size = kVocab,
                            .model_fingerprint = "test-model",
                            .enable_priorities = c.priorities};
    if (c.hash_bits > 0) o.hasher = std::make_shared<testing::CollidingHasher>(c.hash_bits);
    manager_ = *KvCacheManager::Create(std::move(o));
    for (int d = 0; d < 4; ++d) {
      std::vector<TokenId> doc(40);
      for (TokenId& t : doc) t = Uniform(0, kVocab - 1);
      docs_.push_back(doc);
    }
    owner_.assign(kBlocks, std::nullopt);
  }

  void Run(int steps) {
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE(absl::StrCat("step ", step));
      const int op = Uniform(0, 99);
      if (op < 25) {
        NewRequest();
      } else if (op < 32) {
        RetryWaiting();
      } else if (op < 45) {
        Grow();
      } else if (op < 62) {
        Decode();
      } else if (op < 70) {
        Speculate();
      } else if (op < 76) {
        Truncate();
      } else if (op < 90) {
        Free();
      } else if (op < 94) {
        BadFree();
      } else if (op < 98) {
        BadAllocate();
      } else if (op < 99) {
        manager_->ResetPrefixCache();
        ref_.pool.Reset();
      } else {
        StaleHit();
      }
      Check();
      if (::testing::Test::HasFatalFailure() || ::testing::Test::HasNonfatalFailure()) return;
    }
    EXPECT_GT(manager_->stats().hit_tokens, 0);
    EXPECT_GT(manager_->stats().evictions, 0);
  }

  // What the run exercised, for the checks over all seeds (rare events need several runs).
  int64_t promoted_duplicates() const { return manager_->stats().promoted_duplicates; }
  int64_t truncations() const { return num_truncated_; }
  int64_t shared_truncations_refused() const { return num_shared_truncations_refused_; }

 private:
  struct Live {
    CacheRequest req;
    bool admitted;
  };
  // What a full block was computed for: its request's hash and the whole context up to it.
  struct Content {
    BlockHash hash;
    std::string key;
    std::vector<TokenId> tokens;
  };

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // The exact context of block i of r: salt, adapter, and per block its tokens + multimodal keys.
  static std::string ContextKey(const CacheRequest& r, int64_t i) {
    std::string key = absl::StrCat(r.cache_salt(), "|", r.adapter_id(), "|");
    for (int64_t k = 0; k <= i; ++k) {
      for (TokenId t : r.BlockTokens(k)) absl::StrAppend(&key, t, ",");
      for (const MultimodalInput& mm : r.multimodal()) {
        if (mm.offset < (k + 1) * kBs && mm.offset + mm.length > k * kBs) {
          absl::StrAppend(&key, "mm", mm.content_hash.low, ",");
        }
      }
      key += ";";
    }
    return key;
  }

  void NewRequest() {
    const std::vector<TokenId>& doc = docs_[Uniform(0, 3)];
    std::vector<TokenId> prompt(doc.begin(), doc.begin() + Uniform(1, 40));
    for (int i = Uniform(0, 6); i > 0; --i) prompt.push_back(Uniform(0, kVocab - 1));
    RequestCacheKeys keys;
    if (Uniform(0, 4) == 0) keys.cache_salt = "tenant-b";
    if (Uniform(0, 4) == 0) keys.adapter_id = 5;
    if (config_.priorities) {
      constexpr int kLevels[] = {10, kDefaultCachePriority, 60, 90};
      keys.priority.priority = kLevels[Uniform(0, 3)];
      if (Uniform(0, 2) == 0) {  // a "system prompt" span
        keys.priority_spans.push_back(
            {.begin_token = 0, .end_token = Uniform(1, 20), .priority = {.priority = 90}});
      }
    }
    if (Uniform(0, 9) == 0) {
      keys.multimodal.push_back({.offset = Uniform(0, 20),
                                 .length = Uniform(1, 8),
                                 .content_hash = {Uniform(1, 2) * 1u, 0}});
    }
    auto req = manager_->NewRequest(next_id_++, prompt, keys);
    ASSERT_TRUE(req.ok()) << req.status();
    // Twins only with a real hash: with colliding ones the first twin's blocks may replace the
    // blocks of the hit both looked up, which the reference does not model for the second.
    if (config_.hash_bits == 0 && Uniform(0, 3) == 0) {
      AdmitTwins(*std::move(req), prompt, keys);
      return;
    }
    live_.push_back(Live{*std::move(req), false});
    Admit(live_.back());
  }

  // Two identical requests that look up before either allocates (computed in the same step):
  // the second one's blocks become duplicates of the first one's.
  void AdmitTwins(CacheRequest first, const std::vector<TokenId>& prompt,
                  const RequestCacheKeys& keys) {
    auto second = manager_->NewRequest(next_id_++, prompt, keys);
    ASSERT_TRUE(second.ok()) << second.status();
    live_.push_back(Live{std::move(first), false});
    live_.push_back(Live{*std::move(second), false});
    Live& a = live_[live_.size() - 2];
    Live& b = live_.back();
    auto hit_a = manager_->GetComputedBlocks(a.req);
    auto hit_b = manager_->GetComputedBlocks(b.req);
    ASSERT_TRUE(hit_a.ok() && hit_b.ok());
    const std::vector<int> ref_a = ref_.Lookup(a.req);
    const std::vector<int> ref_b = ref_.Lookup(b.req);
    ASSERT_EQ(hit_a->blocks.size(), ref_a.size());
    ASSERT_EQ(hit_b->blocks.size(), ref_b.size());
    Allocate(a, a.req.num_tokens() - hit_a->num_computed_tokens, *hit_a, ref_a);
    Allocate(b, b.req.num_tokens() - hit_b->num_computed_tokens, *hit_b, ref_b);
  }

  void RetryWaiting() {
    for (Live& l : live_) {
      if (!l.admitted) {
        Admit(l);
        return;
      }
    }
  }

  void Admit(Live& l) {
    auto hit = manager_->GetComputedBlocks(l.req);
    ASSERT_TRUE(hit.ok()) << hit.status();
    const std::vector<int> ref_hit = ref_.Lookup(l.req);
    ASSERT_EQ(hit->blocks.size(), ref_hit.size());
    CheckHitContents(l.req, hit->blocks);
    const int64_t todo = l.req.num_tokens() - hit->num_computed_tokens;
    const int64_t n = Uniform(0, 2) == 0 ? Uniform(1, static_cast<int>(todo)) : todo;  // chunked
    Allocate(l, n, *hit, ref_hit);
  }

  void Allocate(Live& l, int64_t n, const ComputedBlocks& hit, const std::vector<int>& ref_hit,
                int64_t lookahead = 0) {
    const absl::Status st =
        manager_->AllocateSlots(l.req, n, hit, {.num_lookahead_tokens = lookahead});
    const absl::StatusCode want = ref_.Allocate(l.req, n, ref_hit, lookahead);
    ASSERT_EQ(st.code(), want) << st;
    if (st.ok()) {
      l.admitted = true;
      TrackOwnership(l.req, hit.blocks.size());
    }
  }

  // Records what the request's own (non-hit) blocks hold once they are full.
  void TrackOwnership(const CacheRequest& r, size_t num_hit) {
    auto table = manager_->GetBlockTable(r.id());
    ASSERT_TRUE(table.ok());
    const int64_t full = *manager_->NumAllocatedTokens(r.id()) / kBs;
    Track& track = tracks_[r.id()];
    if (track.first_owned < 0) track.first_owned = static_cast<int64_t>(num_hit);
    for (int64_t i = std::max(track.first_owned, track.filled);
         i < static_cast<int64_t>(table->size()); ++i) {
      const BlockId b = (*table)[i];
      if (i < full) {
        const auto tokens = r.BlockTokens(i);
        owner_[b] = Content{r.block_hashes()[i], ContextKey(r, i),
                            std::vector<TokenId>(tokens.begin(), tokens.end())};
      } else {
        owner_[b] = std::nullopt;  // not full yet
      }
    }
    track.filled = std::max(track.filled, full);
  }

  void CheckHitContents(const CacheRequest& r, const std::vector<BlockId>& blocks) {
    if (!config_.verify && config_.hash_bits > 0) return;  // wrong reuse is possible by design
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_TRUE(owner_[blocks[i]].has_value()) << "hit block " << blocks[i] << " has no content";
      ASSERT_EQ(owner_[blocks[i]]->key, ContextKey(r, static_cast<int64_t>(i)))
          << "wrong reuse of block " << blocks[i] << " for request block " << i;
    }
  }

  Live* PickAdmitted(bool want_room) {
    std::vector<Live*> c;
    for (Live& l : live_) {
      if (!l.admitted) continue;
      const int64_t have = *manager_->NumAllocatedTokens(l.req.id());
      if (want_room == (have < l.req.num_tokens())) c.push_back(&l);
    }
    return c.empty() ? nullptr : c[Uniform(0, static_cast<int>(c.size()) - 1)];
  }

  void Grow() {
    Live* l = PickAdmitted(/*want_room=*/true);
    if (l == nullptr) return;
    const int64_t room = l->req.num_tokens() - *manager_->NumAllocatedTokens(l->req.id());
    Allocate(*l, Uniform(1, static_cast<int>(room)), {}, {});
  }

  void Decode() {
    Live* l = PickAdmitted(/*want_room=*/false);
    if (l == nullptr) return;
    ASSERT_TRUE(l->req.AppendToken(Uniform(0, kVocab - 1)).ok());
    Allocate(*l, 1, {}, {});
  }

  // A speculative step: the accepted drafts plus the bonus token are appended and given slots
  // (reusing the previous step's lookahead slots), and slots for the next drafts are reserved.
  void Speculate() {
    Live* l = PickAdmitted(/*want_room=*/false);
    if (l == nullptr) return;
    const int accepted = Uniform(1, 4);
    for (int i = 0; i < accepted; ++i) ASSERT_TRUE(l->req.AppendToken(Uniform(0, 1)).ok());
    Allocate(*l, accepted, {}, {}, Uniform(0, 1) == 0 ? Uniform(0, 6) : Uniform(0, 200));
  }

  // Rolls a request back to a random length near its end (rejected tokens that were appended).
  void Truncate() {
    Live* l = PickAdmitted(Uniform(0, 1) == 0);
    if (l == nullptr) return;
    const int64_t tokens = l->req.num_tokens();
    const int64_t n = Uniform(0, 9) == 0
                          ? tokens + 1
                          : tokens - Uniform(0, static_cast<int>(std::min<int64_t>(tokens, 9)));
    const absl::StatusCode want = ref_.Truncate(l->req, n);
    const absl::Status st = manager_->TruncateRequest(l->req, n);
    ASSERT_EQ(st.code(), want) << st;
    num_shared_truncations_refused_ += st.code() == absl::StatusCode::kFailedPrecondition;
    num_truncated_ += st.ok() && n < tokens;
    if (!st.ok()) {
      ASSERT_EQ(l->req.num_tokens(), tokens) << "a failed truncation changed the request";
      return;
    }
    ASSERT_EQ(l->req.num_tokens(), n);
    ASSERT_EQ(l->req.num_full_blocks(), n / kBs);
    Track& track = tracks_[l->req.id()];
    track.filled = std::min<int64_t>(track.filled, n / kBs);  // rewritten blocks are recorded again
    track.first_owned = std::min<int64_t>(track.first_owned, n / kBs);
    TrackOwnership(l->req, 0);
  }

  void Free() {
    if (Uniform(0, 3) == 0) {  // abort a waiting request: it holds nothing
      for (size_t i = 0; i < live_.size(); ++i) {
        if (live_[i].admitted) continue;
        ASSERT_EQ(manager_->Free(live_[i].req.id()).code(), absl::StatusCode::kNotFound);
        live_.erase(live_.begin() + static_cast<ptrdiff_t>(i));
        return;
      }
    }
    std::vector<size_t> admitted;
    for (size_t i = 0; i < live_.size(); ++i) {
      if (live_[i].admitted) admitted.push_back(i);
    }
    if (admitted.empty()) return;
    const size_t i = admitted[Uniform(0, static_cast<int>(admitted.size()) - 1)];
    const RequestId id = live_[i].req.id();
    ASSERT_TRUE(manager_->Free(id).ok());
    ASSERT_TRUE(ref_.Free(id));
    tracks_.erase(id);
    live_.erase(live_.begin() + static_cast<ptrdiff_t>(i));
  }

  void BadFree() {
    const RequestId id = Uniform(0, 1) == 0 ? next_id_ + 1000 : freed_probe_++;
    const bool known = ref_.reqs.contains(id);
    if (known) return;
    const absl::Status st = manager_->Free(id);
    ASSERT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  }

  void BadAllocate() {
    Live* l = PickAdmitted(Uniform(0, 1) == 0);
    if (l == nullptr) return;
    const int64_t room = l->req.num_tokens() - *manager_->NumAllocatedTokens(l->req.id());
    const int64_t n = Uniform(0, 1) == 0 ? room + Uniform(1, 5) : -1;
    ASSERT_EQ(manager_->AllocateSlots(l->req, n).code(), absl::StatusCode::kInvalidArgument);
  }

  // A hit that went stale (its blocks were reset) must be refused with nothing changed.
  void StaleHit() {
    for (Live& l : live_) {
      if (l.admitted) continue;
      auto hit = manager_->GetComputedBlocks(l.req);
      ASSERT_TRUE(hit.ok());
      ref_.Lookup(l.req);
      if (hit->blocks.empty()) return;
      manager_->ResetPrefixCache();
      ref_.pool.Reset();
      ASSERT_EQ(manager_->AllocateSlots(l.req, 1, *hit).code(),
                absl::StatusCode::kFailedPrecondition);
      return;
    }
  }

  void Check() {
    const absl::Status inv = manager_->ValidateInvariants();
    ASSERT_TRUE(inv.ok()) << inv;
    const BlockPool& pool = manager_->pool();
    using S = RefPool::State;
    ASSERT_EQ(pool.NumFreeBlocks(), ref_.pool.Count(S::kFree));
    ASSERT_EQ(pool.NumEvictableBlocks(), ref_.pool.Count(S::kEvictable));
    ASSERT_EQ(pool.NumUsedBlocks(), ref_.pool.Count(S::kUsed));
    ASSERT_EQ(pool.NumFreeBlocks() + pool.NumEvictableBlocks() + pool.NumUsedBlocks(), kBlocks);
    // Same cached hashes, and each indexed block holds the tokens it was computed with.
    std::vector<BlockHash> real_hashes, ref_hashes;
    for (BlockId b = 0; b < kBlocks; ++b) {
      if (pool.IsCached(b)) {
        real_hashes.push_back(*pool.CachedHash(b));
        ASSERT_EQ(pool.FindCached(*pool.CachedHash(b)), b);
        ASSERT_TRUE(owner_[b].has_value()) << "cached block " << b << " was never filled";
        ASSERT_EQ(owner_[b]->hash, *pool.CachedHash(b)) << "block " << b;
        if (pool.store_tokens()) {
          const auto t = pool.CachedTokens(b);
          ASSERT_EQ(std::vector<TokenId>(t.begin(), t.end()), owner_[b]->tokens) << "block " << b;
        }
      }
      if (ref_.pool.at(b).cached) ref_hashes.push_back(ref_.pool.at(b).hash);
    }
    std::sort(real_hashes.begin(), real_hashes.end());
    std::sort(ref_hashes.begin(), ref_hashes.end());
    ASSERT_EQ(real_hashes, ref_hashes);
    for (BlockId b = 0; b < kBlocks; ++b) {  // the same priority for each cached hash
      if (!pool.IsCached(b)) continue;
      const int ref_block = ref_.pool.Find(*pool.CachedHash(b));
      ASSERT_EQ(pool.Priority(b), ref_.pool.at(ref_block).level) << "block " << b;
    }
    int evictable = 0;
    for (BlockId b = 0; b < kBlocks; ++b) evictable += pool.IsCached(b) && pool.RefCount(b) == 0;
    ASSERT_EQ(evictable, pool.NumEvictableBlocks());
    // Same requests and table shapes.
    ASSERT_EQ(manager_->NumRequests(), static_cast<int32_t>(ref_.reqs.size()));
    for (const auto& [id, q] : ref_.reqs) {
      auto t = manager_->GetBlockTable(id);
      ASSERT_TRUE(t.ok());
      ASSERT_EQ(t->size(), q.table.size());
      ASSERT_EQ(*manager_->NumAllocatedTokens(id), q.num_tokens);
      ASSERT_EQ(*manager_->NumLookaheadTokens(id), q.lookahead);
    }
    const CacheStats s = manager_->stats();
    ASSERT_EQ(s.hit_tokens, ref_.hit_tokens);
    ASSERT_EQ(s.evictions, ref_.pool.evictions);
    if (s.resets == 0) {  // every block that entered the index and has not left it is cached
      ASSERT_EQ(s.stored_blocks - s.evictions, manager_->pool().NumCachedBlocks());
    }
    ASSERT_EQ(s.stored_blocks, ref_.pool.stored);
    ASSERT_EQ(s.verification_failures, ref_.verification_failures);
    ASSERT_EQ(s.replaced_blocks, ref_.replaced);
    ASSERT_EQ(s.promoted_duplicates, ref_.pool.promoted);
    ASSERT_EQ(pool.NumDuplicateBlocks(), ref_.pool.NumDuplicates());
  }

  Config config_;
  std::mt19937 rng_;
  RefManager ref_;
  std::unique_ptr<KvCacheManager> manager_;
  std::vector<std::vector<TokenId>> docs_;
  std::vector<Live> live_;
  std::vector<std::optional<Content>> owner_;  // [kBlocks]
  struct Track {
    int64_t first_owned = -1;  // table entries before this are prefix hits (not the request's)
    int64_t filled = 0;        // leading full blocks already recorded
  };
  std::map<RequestId, Track> tracks_;
  RequestId next_id_ = 1;
  RequestId freed_probe_ = 1;
  int num_truncated_ = 0;                   // truncations that dropped tokens
  int num_shared_truncations_refused_ = 0;  // FailedPrecondition: a shared block would be cut
};

class KvCacheManagerRandomTest : public ::testing::TestWithParam<Config> {};

TEST_P(KvCacheManagerRandomTest, MatchesReferenceModel) {
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kSteps = 2000;
  constexpr uint32_t kSeeds = 3;
#else
  constexpr int kSteps = 5000;
  constexpr uint32_t kSeeds = 2;
#endif
  int64_t promoted = 0, truncated = 0, refused = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    Driver driver(GetParam(), seed);
    driver.Run(kSteps);
    if (HasFailure()) return;
    promoted += driver.promoted_duplicates();
    truncated += driver.truncations();
    refused += driver.shared_truncations_refused();
  }
  if (GetParam().hash_bits == 0) {  // 2-bit hashes collide too often for twins to stay alike
    EXPECT_GT(promoted, 0) << "no duplicate was ever promoted";
  }
  EXPECT_GT(truncated, 0);
  EXPECT_GT(refused, 0) << "no truncation into a shared block was refused";
}

std::vector<Config> AllConfigs() {
  std::vector<Config> out;
  for (const char* policy : {"lru", "lfu", "fifo"}) {
    for (bool verify : {true, false}) {
      for (int bits : {0, 2}) out.push_back({policy, verify, bits});
      out.push_back({policy, verify, 0, /*priorities=*/true});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, KvCacheManagerRandomTest, ::testing::ValuesIn(AllConfigs()),
                         [](const auto& info) { return ConfigName(info.param); });

}  // namespace
}  // namespace pagedkv
