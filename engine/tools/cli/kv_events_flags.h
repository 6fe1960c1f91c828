// Copyright 2026 The pagedkv Authors.
//
// The --kv-events-* flags shared by `pagedkv replay` and `pagedkv generate`, and the publisher
// they configure (include/pagedkv/events/kv_event_publisher.h).
//
// Example:
//   auto flags = std::make_shared<KvEventsFlags>();
//   AddKvEventsFlags(cmd, flags.get());
//   ...  // in the callback:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvEventPublisher> pub, MakeKvEventPublisher(*flags));
//   if (pub != nullptr) { /* publish per step */ }
#ifndef PAGEDKV_ENGINE_TOOLS_CLI_KV_EVENTS_FLAGS_H_
#define PAGEDKV_ENGINE_TOOLS_CLI_KV_EVENTS_FLAGS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "pagedkv/events/kv_event_publisher.h"
#include "pagedkv/export.h"

namespace pagedkv::cli {

struct PAGEDKV_EXPORT KvEventsFlags {
  std::string endpoint;                // --kv-events-endpoint: PUB address; empty = no events
  std::string replay_endpoint;         // --kv-events-replay-endpoint: ROUTER address; empty = none
  std::string topic;                   // --kv-events-topic
  std::string encoding = "vllm";       // --kv-events-encoding: vllm, all-map or all-array
  std::string hash = "uint64";         // --kv-events-hash: uint64 or bytes
  int32_t buffer_steps = 10000;        // --kv-events-buffer-steps: batches kept for replay
  double hold_seconds = 0;             // --kv-events-hold-s: keep the sockets open after the run
  double wait_subscriber_seconds = 2;  // --kv-events-wait-subscriber-s: hold the first send
};

// Registers the flags on `cmd`; `flags` must outlive the parse.
PAGEDKV_EXPORT void AddKvEventsFlags(CLI::App* cmd, KvEventsFlags* flags);

// The publisher the flags ask for; null when no endpoint was given. InvalidArgument for a bad
// encoding / hash name (the old names "map" / "array" are refused with the new ones); Unavailable
// when an address cannot be bound.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<KvEventPublisher>> MakeKvEventPublisher(
    const KvEventsFlags& flags);

// Flushes, keeps the sockets open for flags.hold_seconds (for late subscribers and replay
// requests), then shuts the publisher down. No-op for null.
PAGEDKV_EXPORT void FinishKvEventPublisher(const KvEventsFlags& flags, KvEventPublisher* publisher);

}  // namespace pagedkv::cli

#endif  // PAGEDKV_ENGINE_TOOLS_CLI_KV_EVENTS_FLAGS_H_
