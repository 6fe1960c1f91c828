// Copyright 2026 The pagedkv Authors.
#include "pagedkv/events/kv_events.h"

#include "absl/strings/str_cat.h"

namespace pagedkv {

std::string_view KvEventTypeName(KvEventType type) {
  switch (type) {
    case KvEventType::kBlockStored:
      return "stored";
    case KvEventType::kBlockRemoved:
      return "removed";
    case KvEventType::kAllBlocksCleared:
      return "cleared";
  }
  return "unknown";
}

std::string KvEvent::ToString() const {
  if (type == KvEventType::kAllBlocksCleared) return std::string(KvEventTypeName(type));
  return absl::StrCat(std::string(KvEventTypeName(type)), " hash=", hash.ToString(),
                      " parent=", parent_hash.ToString(), " tokens=", token_count,
                      " block=", block);
}

}  // namespace pagedkv
