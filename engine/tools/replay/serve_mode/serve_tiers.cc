// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/serve_tiers.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/tools/replay/serve_mode/shared_tier.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/host_tier.h"

namespace pagedkv::replay {

std::vector<LinkPreset> LinkPresets() {
  return {{"pcie4", 25e9, 2e-6},      {"pcie5", 50e9, 2e-6}, {"25gbe", 3.125e9, 100e-6},
          {"100gbe", 12.5e9, 50e-6},  {"rdma", 50e9, 10e-6}, {"nvme", 6.5e9, 80e-6},
          {"sata-ssd", 0.5e9, 100e-6}};
}

absl::StatusOr<LinkPreset> FindLinkPreset(std::string_view name) {
  std::vector<std::string> names;
  for (const LinkPreset& p : LinkPresets()) {
    if (p.name == name) return p;
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown link preset \"%s\"; expected one of: %s", std::string(name),
                      absl::StrJoin(names, ", ")));
}

absl::StatusOr<std::unique_ptr<ServeTiers>> ServeTiers::Create(const ServeTierOptions& options,
                                                               KvCacheManager* manager,
                                                               double block_bytes,
                                                               HostTier* shared_remote) {
  if (options.host_capacity_blocks < 0 || options.remote_capacity_blocks < 0 ||
      options.disk_capacity_blocks < 0) {
    return absl::InvalidArgumentError("tier capacities must be >= 0 blocks");
  }
  if (options.host_store_threshold < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--host-store-threshold must be >= 0 prefix hits (got %d)", options.host_store_threshold));
  }
  if (!(options.host_link.bytes_per_second > 0) || !(options.remote_link.bytes_per_second > 0) ||
      !(options.disk_link.bytes_per_second > 0)) {
    return absl::InvalidArgumentError("tier links need a bandwidth > 0");
  }
  auto tiers = std::unique_ptr<ServeTiers>(new ServeTiers(options, block_bytes));
  std::vector<std::unique_ptr<KvTier>> chain;
  const std::pair<int64_t, const char*> wanted[] = {{options.host_capacity_blocks, "host"},
                                                    {options.disk_capacity_blocks, "disk"},
                                                    {options.remote_capacity_blocks, "remote"}};
  for (const auto& [capacity, name] : wanted) {
    if (capacity == 0) continue;
    if (shared_remote != nullptr && std::string(name) == "remote") {
      chain.push_back(std::make_unique<SharedTierView>(shared_remote));
      continue;
    }
    HostTierOptions o{.capacity_blocks = capacity, .policy = options.policy, .name = name};
    if (std::string(name) == "host") {
      o.store = {.rule = options.host_store, .threshold = options.host_store_threshold};
    }
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<HostTier> tier, HostTier::Create(std::move(o)));
    chain.push_back(std::move(tier));
  }
  PAGEDKV_ASSIGN_OR_RETURN(tiers->chain_,
                           TierChain::Create(std::move(chain), &tiers->io_, manager));
  return tiers;
}

const KvTier* ServeTiers::Find(std::string_view name) const {
  for (const auto& t : chain_->tiers()) {
    if (t->name() == name) return t.get();
  }
  return nullptr;
}

TierStats ServeTiers::host_stats() const {
  const KvTier* t = Find("host");
  return t == nullptr ? TierStats{} : t->stats();
}

TierStats ServeTiers::disk_stats() const {
  const KvTier* t = Find("disk");
  return t == nullptr ? TierStats{} : t->stats();
}

TierStats ServeTiers::remote_stats() const {
  const KvTier* t = Find("remote");
  return t == nullptr ? TierStats{} : t->stats();
}

double ServeTiers::TakeLoadSeconds() {
  const TierStats host = host_stats(), remote = remote_stats(), disk = disk_stats();
  const double host_blocks = static_cast<double>(host.hit_blocks - charged_host_.hit_blocks);
  const double remote_blocks = static_cast<double>(remote.hit_blocks - charged_remote_.hit_blocks);
  const double trips = static_cast<double>(remote.lookups - charged_remote_.lookups);
  const double disk_blocks = static_cast<double>(disk.hit_blocks - charged_disk_.hit_blocks);
  const double disk_reads = static_cast<double>(disk.lookups - charged_disk_.lookups);
  charged_host_ = host;
  charged_remote_ = remote;
  charged_disk_ = disk;
  return host_blocks * block_bytes_ / options_.host_link.bytes_per_second +
         (host_blocks > 0 ? options_.host_link.latency_s : 0.0) +
         disk_blocks * block_bytes_ / options_.disk_link.bytes_per_second +
         disk_reads * options_.disk_link.latency_s +
         remote_blocks * block_bytes_ / options_.remote_link.bytes_per_second +
         trips * options_.remote_link.latency_s;
}

}  // namespace pagedkv::replay
