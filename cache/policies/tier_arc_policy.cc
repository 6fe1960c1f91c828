// Copyright 2026 The pagedkv Authors.
//
// "arc" TierPolicy: Adaptive Replacement Cache (Megiddo and Modha, "ARC: A Self-Tuning, Low
// Overhead Replacement Cache", FAST 2003), with c = capacity():
//   T1 - resident, seen once recently;      B1 - ghosts (hash only) dropped from T1;
//   T2 - resident, seen at least twice;     B2 - ghosts dropped from T2;
//   p  - target size of T1, in [0, c], raised by B1 ghost hits and lowered by B2 ghost hits.
// Each list has its most recent entry at the front. Invariants: every hash is on at most one
// list (where_ says which); |T1| + |T2| <= c; |T1| + |B1| <= c; |T1| + |T2| + |B1| + |B2| <= 2c.
// Departures from the paper, for a tier whose entries can also be erased (a corrupt value):
// Replace drops a resident entry only when T1 + T2 is full, and takes T1's oldest entry when T2
// is empty. Without Erase the behaviour is the paper's.
#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/policies/arc_target.h"
#include "cache/policies/tier_policies.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/tier_policy.h"

namespace pagedkv {
namespace {

enum ListId : uint8_t { kT1 = 0, kT2 = 1, kB1 = 2, kB2 = 3 };

class TierArcPolicy final : public EvictingTierPolicy {
 public:
  explicit TierArcPolicy(int64_t capacity) : c_(capacity), target_(capacity) {}
  std::string_view name() const override { return "arc"; }
  int64_t capacity() const override { return c_; }
  int64_t size() const override { return Size(kT1) + Size(kT2); }
  bool Contains(const BlockHash& hash) const override {
    auto it = where_.find(hash);
    return it != where_.end() && (it->second.list == kT1 || it->second.list == kT2);
  }

  void Hit(const BlockHash& hash) override {
    if (!Contains(hash)) return;
    Move(hash, kT2);
  }

  std::vector<BlockHash> Insert(const BlockHash& hash) override;

  bool Erase(const BlockHash& hash) override {
    if (!Contains(hash)) return false;
    Remove(hash);
    return true;
  }

  std::optional<BlockHash> Victim(const Evictable& evictable) const override {
    // REPLACE's list first, then the other.
    const bool from_t1 = target_.ReplaceFromT1(Size(kT1), Size(kT2), /*after_b2_hit=*/false);
    for (const ListId l : {from_t1 ? kT1 : kT2, from_t1 ? kT2 : kT1}) {
      for (auto it = lists_[l].rbegin(); it != lists_[l].rend(); ++it) {
        if (evictable == nullptr || evictable(*it)) return *it;
      }
    }
    return std::nullopt;
  }

  std::optional<BlockHash> EvictOne(const Evictable& evictable) override {
    const std::optional<BlockHash> victim = Victim(evictable);
    // The victim becomes a ghost, as REPLACE's does.
    if (victim.has_value()) Move(*victim, where_.at(*victim).list == kT1 ? kB1 : kB2);
    return victim;
  }

  std::vector<BlockHash> Resident() const override {
    std::vector<BlockHash> out(lists_[kT1].begin(), lists_[kT1].end());
    out.insert(out.end(), lists_[kT2].begin(), lists_[kT2].end());
    return out;
  }

 private:
  struct Where {
    ListId list;
    std::list<BlockHash>::iterator it;
  };
  int64_t Size(ListId l) const { return static_cast<int64_t>(lists_[l].size()); }
  void Push(const BlockHash& hash, ListId l) {
    lists_[l].push_front(hash);
    where_[hash] = Where{l, lists_[l].begin()};
  }
  void Remove(const BlockHash& hash) {
    auto it = where_.find(hash);
    lists_[it->second.list].erase(it->second.it);
    where_.erase(it);
  }
  void Move(const BlockHash& hash, ListId to) {
    Remove(hash);
    Push(hash, to);
  }
  // Moves the oldest entry of `from` to the front of ghost list `to` (it is dropped).
  void Demote(ListId from, ListId to, std::vector<BlockHash>* dropped) {
    const BlockHash victim = lists_[from].back();
    dropped->push_back(victim);
    Move(victim, to);
  }
  void DropOldest(ListId l) {
    const BlockHash victim = lists_[l].back();
    Remove(victim);
  }
  // The paper's REPLACE: makes room for one resident entry when T1 + T2 is full.
  void Replace(bool in_b2, std::vector<BlockHash>* dropped) {
    if (Size(kT1) + Size(kT2) < c_) return;
    if (target_.ReplaceFromT1(Size(kT1), Size(kT2), in_b2)) {
      Demote(kT1, kB1, dropped);
    } else {
      Demote(kT2, kB2, dropped);
    }
  }
  // A hash on no list: the paper's case IV.
  void InsertNew(const BlockHash& hash, std::vector<BlockHash>* dropped);

  int64_t c_;
  internal::ArcTarget target_;  // p, the target size of T1 (shared with the pool's "arc")
  std::array<std::list<BlockHash>, 4> lists_;
  absl::flat_hash_map<BlockHash, Where> where_;
};

std::vector<BlockHash> TierArcPolicy::Insert(const BlockHash& hash) {
  std::vector<BlockHash> dropped;
  auto it = where_.find(hash);
  if (it == where_.end()) {
    InsertNew(hash, &dropped);
    return dropped;
  }
  switch (it->second.list) {
    case kT1:
    case kT2:
      Move(hash, kT2);
      break;
    case kB1:
      target_.OnGhostHitB1(Size(kB1), Size(kB2));
      Remove(hash);
      Replace(/*in_b2=*/false, &dropped);
      Push(hash, kT2);
      break;
    case kB2:
      target_.OnGhostHitB2(Size(kB1), Size(kB2));
      Remove(hash);
      Replace(/*in_b2=*/true, &dropped);
      Push(hash, kT2);
      break;
  }
  return dropped;
}

void TierArcPolicy::InsertNew(const BlockHash& hash, std::vector<BlockHash>* dropped) {
  const int64_t l1 = Size(kT1) + Size(kB1);
  const int64_t total = l1 + Size(kT2) + Size(kB2);
  if (l1 >= c_) {
    if (Size(kB1) > 0) {
      DropOldest(kB1);
      Replace(/*in_b2=*/false, dropped);
    } else {
      dropped->push_back(lists_[kT1].back());
      DropOldest(kT1);
    }
  } else if (total >= c_) {
    if (total >= 2 * c_ && Size(kB2) > 0) DropOldest(kB2);
    Replace(/*in_b2=*/false, dropped);
  }
  Push(hash, kT1);
}

}  // namespace

std::unique_ptr<EvictingTierPolicy> NewTierArcPolicy(int64_t capacity) {
  return std::make_unique<TierArcPolicy>(capacity);
}

absl::StatusOr<std::unique_ptr<TierPolicy>> MakeTierPolicy(std::string_view name,
                                                           int64_t capacity) {
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<EvictingTierPolicy> policy,
                           MakeEvictingTierPolicy(name, capacity));
  return policy;
}

absl::StatusOr<std::unique_ptr<EvictingTierPolicy>> MakeEvictingTierPolicy(std::string_view name,
                                                                           int64_t capacity) {
  if (capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tier policy capacity must be >= 1 block, got ", capacity));
  }
  if (name == "lru") return NewTierLruPolicy(capacity);
  if (name == "arc") return NewTierArcPolicy(capacity);
  return absl::InvalidArgumentError(absl::StrCat("unknown tier eviction policy \"",
                                                 std::string(name), "\"; use \"lru\" or \"arc\""));
}

}  // namespace pagedkv
