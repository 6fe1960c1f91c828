// Copyright 2026 The pagedkv Authors.
//
// The eviction-policy factory by name.
#include "pagedkv/cache/eviction_policy.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagedkv {

std::vector<std::string_view> EvictionPolicyNames() {
  return {"lru", "lfu", "fifo", "arc", "s3fifo", "wtinylfu", "chain"};
}

absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name) {
  if (name == "lru") return MakeLruPolicy();
  if (name == "lfu") return MakeLfuPolicy();
  if (name == "fifo") return MakeFifoPolicy();
  if (name == "arc") return MakeArcPolicy();
  if (name == "s3fifo") return MakeS3FifoPolicy();
  if (name == "wtinylfu") return MakeWTinyLfuPolicy();
  if (name == "chain") return MakeChainPolicy();
  std::string choices;
  for (const std::string_view choice : EvictionPolicyNames()) {
    if (!choices.empty()) choices += ", ";
    choices += choice;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown eviction policy \"", std::string(name),
                                                 "\"; choose one of: ", choices));
}

}  // namespace pagedkv
