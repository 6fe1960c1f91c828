// Copyright 2026 The pagedkv Authors.
//
// The eviction-policy factory by name.
#include "pagedkv/eviction_policy.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pagedkv {

std::vector<std::string_view> EvictionPolicyNames() { return {"lru", "lfu", "fifo"}; }

absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name) {
  if (name == "lru") return MakeLruPolicy();
  if (name == "lfu") return MakeLfuPolicy();
  if (name == "fifo") return MakeFifoPolicy();
  std::string choices;
  for (const std::string_view choice : EvictionPolicyNames()) {
    if (!choices.empty()) choices += ", ";
    choices += choice;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown eviction policy \"", std::string(name),
                                                 "\"; choose one of: ", choices));
}

}  // namespace pagedkv
