// Copyright 2026 The pagedkv Authors.
#include "pagedkv/tiers/kv_tier.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pagedkv {

absl::StatusOr<TierStoreRule> ParseTierStoreRule(std::string_view name) {
  if (name == "write-through") return TierStoreRule::kWriteThrough;
  if (name == "write-back") return TierStoreRule::kWriteBack;
  return absl::InvalidArgumentError(absl::StrCat("unknown tier store rule \"", std::string(name),
                                                 "\"; use \"write-through\" or \"write-back\""));
}

std::string_view TierStoreRuleName(TierStoreRule rule) {
  return rule == TierStoreRule::kWriteBack ? "write-back" : "write-through";
}

double TierStats::HitRate() const {
  return queried_blocks > 0 ? static_cast<double>(hit_blocks) / queried_blocks : 0.0;
}

std::string TierStats::Summary() const {
  return absl::StrFormat(
      "lookups=%d queried=%d hits=%d (%.1f%%) loaded_bytes=%d stored=%d stored_bytes=%d "
      "skipped=%d evictions=%d faults=%d incidents=%d resident=%d resident_bytes=%d "
      "shared_resident_bytes=%d",
      lookups, queried_blocks, hit_blocks, 100.0 * HitRate(), loaded_bytes, stored_blocks,
      stored_bytes, store_skipped, evictions, faults, incidents, resident_blocks, resident_bytes,
      shared_resident_bytes);
}

int KvTier::AddEventListener(KvEventListener listener) {
  const int id = next_listener_id_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

bool KvTier::RemoveEventListener(int id) {
  auto it = std::find_if(listeners_.begin(), listeners_.end(),
                         [id](const auto& entry) { return entry.first == id; });
  if (it == listeners_.end()) return false;
  listeners_.erase(it);
  return true;
}

void KvTier::Emit(const KvEvent& event) const {
  for (const auto& [id, listener] : listeners_) listener(event);
}

}  // namespace pagedkv
