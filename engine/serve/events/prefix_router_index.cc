// Copyright 2026 The pagedkv Authors.
//
// PrefixRouterIndex (include/pagedkv/events/prefix_router_index.h). Invariants: (instance, hash) is
// in instances_[instance] iff holders_[hash] has a Holder for the instance, and every Holder has a
// non-zero media mask; holders_ has no empty lists.
#include "pagedkv/events/prefix_router_index.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pagedkv {
namespace {

constexpr uint32_t kAllMedia = 0xffffffffu;
constexpr size_t kMaxMedia = 32;

// Among instances of equal cost: the smaller load, then fewer blocks held, then the smaller id.
bool TieBreakBefore(const InstancePrefixMatch& a, double load_a, const InstancePrefixMatch& b,
                    double load_b) {
  if (load_a != load_b) return load_a < load_b;
  if (a.held_blocks != b.held_blocks) return a.held_blocks < b.held_blocks;
  return a.instance < b.instance;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrefixRouterIndex>> PrefixRouterIndex::Create(
    PrefixRouterIndexOptions options) {
  absl::flat_hash_set<std::string> seen;
  for (const auto& [medium, weight] : options.medium_weights) {
    if (!(weight >= 0 && weight <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("medium weight of ", medium, " must be in [0, 1], got ", weight));
    }
    if (!seen.insert(medium).second) {
      return absl::InvalidArgumentError(absl::StrCat("medium ", medium, " is listed twice"));
    }
  }
  if (options.medium_weights.size() >= kMaxMedia) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxMedia - 1, " media"));
  }
  if (!(options.unknown_medium_weight >= 0 && options.unknown_medium_weight <= 1)) {
    return absl::InvalidArgumentError("unknown_medium_weight must be in [0, 1]");
  }
  return std::unique_ptr<PrefixRouterIndex>(new PrefixRouterIndex(std::move(options)));
}

PrefixRouterIndex::PrefixRouterIndex(PrefixRouterIndexOptions options)
    : options_(std::move(options)) {
  for (const auto& [medium, weight] : options_.medium_weights) {
    media_.emplace_back(medium);
    weights_.push_back(weight);
  }
}

uint32_t PrefixRouterIndex::MediumBit(const std::optional<std::string>& medium) {
  for (size_t i = 0; i < media_.size(); ++i) {
    if (media_[i] == medium) return 1u << i;
  }
  if (media_.size() == kMaxMedia) return 1u << (kMaxMedia - 1);  // share the last slot
  media_.push_back(medium);
  weights_.push_back(options_.unknown_medium_weight);
  return 1u << (media_.size() - 1);
}

double PrefixRouterIndex::BestWeight(uint32_t media) const {
  double best = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (media & (1u << i)) best = std::max(best, weights_[i]);
  }
  return best;
}

void PrefixRouterIndex::AddInstance(InstanceId instance) { instances_[instance]; }

void PrefixRouterIndex::Store(InstanceId instance, const BlockHash& hash, uint32_t bit) {
  auto& holders = holders_[hash];
  for (Holder& h : holders) {
    if (h.instance == instance) {
      h.media |= bit;
      return;
    }
  }
  holders.push_back(Holder{instance, bit});
  instances_[instance].insert(hash);
}

void PrefixRouterIndex::Drop(InstanceId instance, const BlockHash& hash, uint32_t bits) {
  const auto it = holders_.find(hash);
  if (it == holders_.end()) return;
  auto& holders = it->second;
  for (size_t k = 0; k < holders.size(); ++k) {
    if (holders[k].instance != instance) continue;
    holders[k].media &= ~bits;
    if (holders[k].media == 0) {
      holders.erase(holders.begin() + static_cast<ptrdiff_t>(k));
      instances_[instance].erase(hash);
      if (holders.empty()) holders_.erase(it);
    }
    return;
  }
}

void PrefixRouterIndex::Apply(InstanceId instance, const KvBatchEvent& event) {
  AddInstance(instance);
  switch (event.type) {
    case KvEventType::kBlockStored: {
      const uint32_t bit = MediumBit(event.medium);
      for (const BlockHash& h : event.block_hashes) Store(instance, h, bit);
      return;
    }
    case KvEventType::kBlockRemoved: {
      const uint32_t bits = event.medium.has_value() ? MediumBit(event.medium) : kAllMedia;
      for (const BlockHash& h : event.block_hashes) Drop(instance, h, bits);
      return;
    }
    case KvEventType::kAllBlocksCleared: {
      const std::vector<BlockHash> held(instances_[instance].begin(), instances_[instance].end());
      for (const BlockHash& h : held) Drop(instance, h, kAllMedia);
      return;
    }
  }
}

void PrefixRouterIndex::Apply(InstanceId instance, const KvEventBatch& batch) {
  AddInstance(instance);
  for (const KvBatchEvent& e : batch.events) Apply(instance, e);
}

bool PrefixRouterIndex::RemoveInstance(InstanceId instance) {
  const auto it = instances_.find(instance);
  if (it == instances_.end()) return false;
  const std::vector<BlockHash> held(it->second.begin(), it->second.end());
  for (const BlockHash& h : held) Drop(instance, h, kAllMedia);
  instances_.erase(instance);
  return true;
}

int64_t PrefixRouterIndex::NumBlocks(InstanceId instance) const {
  const auto it = instances_.find(instance);
  return it == instances_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

std::vector<InstancePrefixMatch> PrefixRouterIndex::Match(std::span<const BlockHash> hashes) const {
  std::vector<InstancePrefixMatch> out;
  out.reserve(instances_.size());
  for (const auto& [id, blocks] : instances_) {
    out.push_back(
        InstancePrefixMatch{.instance = id, .held_blocks = static_cast<int64_t>(blocks.size())});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.instance < b.instance; });
  // `active`: indexes into `out` of instances that held every block so far.
  std::vector<size_t> active(out.size());
  for (size_t k = 0; k < out.size(); ++k) active[k] = k;
  for (const BlockHash& hash : hashes) {
    if (active.empty()) break;
    const auto it = holders_.find(hash);
    if (it == holders_.end()) break;
    size_t kept = 0;
    for (const size_t k : active) {
      for (const Holder& h : it->second) {
        if (h.instance != out[k].instance) continue;
        ++out[k].matched_blocks;
        out[k].weighted_blocks += BestWeight(h.media);
        active[kept++] = k;
        break;
      }
    }
    active.resize(kept);
  }
  return out;
}

InstanceId PickInstance(std::span<const InstancePrefixMatch> matches, std::span<const double> loads,
                        int64_t request_blocks, const RouterCostOptions& options) {
  size_t best = 0;
  double best_cost = 0;
  for (size_t k = 0; k < matches.size(); ++k) {
    const double uncached = static_cast<double>(request_blocks) - matches[k].weighted_blocks;
    const double cost = options.prefill_weight * uncached + options.load_weight * loads[k];
    const bool better =
        k == 0 || cost < best_cost ||
        (cost == best_cost && TieBreakBefore(matches[k], loads[k], matches[best], loads[best]));
    if (better) {
      best = k;
      best_cost = cost;
    }
  }
  return matches[best].instance;
}

}  // namespace pagedkv
