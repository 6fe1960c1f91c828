// Copyright 2026 The pagedkv Authors.
#include "cache/policies/priority_policy.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace pagedkv {
namespace {
constexpr double kForever = std::numeric_limits<double>::infinity();
}  // namespace

PriorityPolicy::PriorityPolicy(PolicyFactory make_level, double max_high_fraction, Clock clock)
    : make_level_(std::move(make_level)),
      max_high_fraction_(max_high_fraction),
      clock_(std::move(clock)) {
  name_ = std::string(Level(kDefaultCachePriority).Name());
}

EvictionPolicy& PriorityPolicy::Level(int32_t level) {
  std::unique_ptr<EvictionPolicy>& p = levels_[level];
  if (p == nullptr) {
    p = make_level_();
    p->Init(num_blocks_);
  }
  return *p;
}

void PriorityPolicy::Init(int32_t num_blocks) {
  num_blocks_ = num_blocks;
  max_high_ = static_cast<int32_t>(std::floor(max_high_fraction_ * num_blocks));
  num_high_ = 0;
  for (auto& p : levels_) {
    if (p != nullptr) p->Init(num_blocks);
  }
  candidates_.fill(0);
  level_.assign(num_blocks, kDefaultCachePriority);
  candidate_.assign(num_blocks, 0);
  cached_.assign(num_blocks, 0);
  hash_.assign(num_blocks, BlockHash{});
  expires_.assign(num_blocks, kForever);
  epoch_.assign(num_blocks, 0);
  next_.assign(num_blocks, CachePriority{});
  next_expires_.assign(num_blocks, std::nan(""));
  expiries_ = {};
}

int32_t PriorityPolicy::Admit(int32_t level) const {
  return level > kDefaultCachePriority && num_high_ >= max_high_ ? kDefaultCachePriority : level;
}

void PriorityPolicy::Enter(BlockId block, int32_t level, double expires_at) {
  if (level == kDefaultCachePriority) expires_at = kForever;
  level_[block] = static_cast<int8_t>(level);
  expires_[block] = expires_at;
  ++epoch_[block];
  num_high_ += level > kDefaultCachePriority;
  if (expires_at != kForever) expiries_.push({expires_at, block, epoch_[block]});
}

void PriorityPolicy::Leave(BlockId block) {
  num_high_ -= level_[block] > kDefaultCachePriority;
  ++epoch_[block];
  cached_[block] = 0;
  if (candidate_[block]) {
    candidate_[block] = 0;
    --candidates_[level_[block]];
  }
}

void PriorityPolicy::OnInsert(BlockId block, const BlockHash& hash) {
  OnInsertInChain(block, hash, BlockHash{}, kNullBlock);
}

void PriorityPolicy::OnInsertInChain(BlockId block, const BlockHash& hash,
                                     const BlockHash& parent_hash, BlockId parent_block) {
  const CachePriority& p = next_[block];
  const double expires =
      std::isnan(next_expires_[block]) ? clock_() + p.retention_seconds : next_expires_[block];
  Enter(block, Admit(p.priority), expires);
  next_[block] = CachePriority{};
  next_expires_[block] = std::nan("");
  cached_[block] = 1;
  hash_[block] = hash;
  Level(level_[block]).OnInsertInChain(block, hash, parent_hash, parent_block);
}

void PriorityPolicy::OnAccess(BlockId block, const BlockHash& hash) {
  if (candidate_[block]) {
    candidate_[block] = 0;
    --candidates_[level_[block]];
  }
  Level(level_[block]).OnAccess(block, hash);
}

void PriorityPolicy::OnRelease(BlockId block, const BlockHash& hash) {
  if (!cached_[block]) {  // a pick offered back by the pool: cached again, at its old level
    cached_[block] = 1;
    Enter(block, level_[block], expires_[block]);
  }
  if (!candidate_[block]) {
    candidate_[block] = 1;
    ++candidates_[level_[block]];
  }
  Level(level_[block]).OnRelease(block, hash);
}

void PriorityPolicy::OnRemove(BlockId block, const BlockHash& hash) {
  Level(level_[block]).OnRemove(block, hash);
  Leave(block);
}

BlockId PriorityPolicy::PickVictim() {
  DemoteExpired();
  for (int32_t level = kMinCachePriority; level <= kMaxCachePriority; ++level) {
    if (candidates_[level] == 0) continue;
    const BlockId victim = levels_[level]->PickVictim();
    if (victim >= 0 && victim < num_blocks_ && cached_[victim] && level_[victim] == level) {
      Leave(victim);
    }
    return victim;  // a bad pick is the pool's to report
  }
  return kNullBlock;
}

void PriorityPolicy::Clear() {
  for (auto& p : levels_) {
    if (p != nullptr) p->Clear();
  }
  candidates_.fill(0);
  std::fill(candidate_.begin(), candidate_.end(), 0);
  std::fill(cached_.begin(), cached_.end(), 0);
  for (uint32_t& e : epoch_) ++e;
  num_high_ = 0;
  expiries_ = {};
}

void PriorityPolicy::SetNext(BlockId block, const CachePriority& priority) {
  next_[block] = priority;
  next_expires_[block] = std::nan("");
}

void PriorityPolicy::InheritNext(BlockId to, BlockId from) {
  next_[to] = CachePriority{.priority = level_[from]};
  next_expires_[to] = expires_[from];
}

void PriorityPolicy::MoveTo(BlockId block, int32_t level, double expires_at) {
  const BlockHash hash = hash_[block];
  const bool candidate = candidate_[block];
  Level(level_[block]).OnRemove(block, hash);
  Leave(block);
  Enter(block, level, expires_at);
  cached_[block] = 1;
  Level(level).OnInsert(block, hash);
  if (candidate) OnRelease(block, hash);
}

void PriorityPolicy::Raise(BlockId block, const CachePriority& priority) {
  if (!cached_[block] || priority.priority < level_[block]) return;
  const double expires = clock_() + priority.retention_seconds;
  if (priority.priority == level_[block]) {
    if (level_[block] == kDefaultCachePriority || expires <= expires_[block]) return;
    expires_[block] = expires;  // renewed; the old heap entry goes stale with the epoch
    ++epoch_[block];
    if (expires != kForever) expiries_.push({expires, block, epoch_[block]});
    return;
  }
  num_high_ -= level_[block] > kDefaultCachePriority;  // Admit sees the cap without this block
  const int32_t level = Admit(priority.priority);
  num_high_ += level_[block] > kDefaultCachePriority;
  if (level > level_[block]) MoveTo(block, level, expires);
}

void PriorityPolicy::DemoteExpired() {
  if (expiries_.empty()) return;
  const double now = clock_();
  while (!expiries_.empty() && expiries_.top().at <= now) {
    const Expiry e = expiries_.top();
    expiries_.pop();
    if (cached_[e.block] && epoch_[e.block] == e.epoch) {
      MoveTo(e.block, kDefaultCachePriority, kForever);
    }
  }
}

}  // namespace pagedkv
