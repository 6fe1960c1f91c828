// Copyright 2026 The pagedkv Authors.
//
// KvEventSubscriber: the receiving end of a vLLM-style KV event stream (a KvEventPublisher, or
// vLLM itself). It subscribes to the PUB socket, decodes each three-frame message, checks that
// sequence numbers are contiguous and, on a gap, asks the publisher's ROUTER replay socket for
// the missed batches (a DEALER sending [empty, start seq]) before handing on the batch that
// revealed the gap. Batches are delivered in sequence order, each once; numbers the replay
// buffer no longer holds are counted as lost (the consumer should then resynchronise that
// instance, e.g. PrefixRouterIndex::RemoveInstance).
//
// A subscriber that joins late passes start_seq = 0 to recover everything still buffered.
//
// Thread safety: not thread-safe; one thread polls.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto sub, pagedkv::KvEventSubscriber::Create(
//       {.endpoint = "tcp://10.0.0.5:5557", .replay_endpoint = "tcp://10.0.0.5:5558"}));
//   PAGEDKV_ASSIGN_OR_RETURN(std::vector<pagedkv::ReceivedKvEventBatch> got, sub->Poll(100));
//   for (const auto& r : got) index.Apply(instance, r.batch);
#ifndef PAGEDKV_EVENTS_KV_EVENT_SUBSCRIBER_H_
#define PAGEDKV_EVENTS_KV_EVENT_SUBSCRIBER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/export.h"

namespace pagedkv {

struct PAGEDKV_EXPORT KvEventSubscriberOptions {
  std::string endpoint;              // the publisher's PUB address (connected)
  std::string replay_endpoint;       // its ROUTER replay address; empty = gaps are only counted
  std::string topic;                 // subscription prefix; empty = everything
  int64_t start_seq = -1;            // >= 0: expect this sequence number first (recover from it)
  int32_t replay_timeout_ms = 2000;  // how long a replay may take before giving up
  int32_t rcvhwm = 100000;           // SUB receive high-water mark (messages); 0 = no limit
};

struct PAGEDKV_EXPORT ReceivedKvEventBatch {
  int64_t seq = 0;        // the publisher's sequence number
  bool replayed = false;  // came through the replay socket
  KvEventBatch batch;
};

struct PAGEDKV_EXPORT KvEventSubscriberStats {
  int64_t received = 0;       // batches delivered (live + replayed)
  int64_t replayed = 0;       // of those, recovered through the replay socket
  int64_t gaps = 0;           // gaps detected in the live stream
  int64_t lost = 0;           // sequence numbers neither received nor recovered
  int64_t duplicates = 0;     // messages with an already delivered number (ignored)
  int64_t decode_errors = 0;  // malformed messages (skipped; their number counts as lost)
};

class PAGEDKV_EXPORT KvEventSubscriber {
 public:
  // Connects. InvalidArgument for an empty endpoint; Unavailable, with ZeroMQ's reason, when
  // an address cannot be connected.
  static absl::StatusOr<std::unique_ptr<KvEventSubscriber>> Create(
      KvEventSubscriberOptions options);

  ~KvEventSubscriber();
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Waits up to `timeout_ms` for the first message, then takes every message already waiting.
  // Returns the batches in sequence order (empty on timeout). Unavailable if the socket fails.
  absl::StatusOr<std::vector<ReceivedKvEventBatch>> Poll(int32_t timeout_ms);

  // Asks the replay socket for every buffered batch from next_seq() (0 before any message) now,
  // without waiting for a live message to reveal a gap (e.g. the stream went quiet after a loss).
  // Empty without a replay endpoint. Unavailable if the socket fails.
  absl::StatusOr<std::vector<ReceivedKvEventBatch>> Recover();

  // The next sequence number expected (-1 before the first message without start_seq).
  int64_t next_seq() const;
  KvEventSubscriberStats stats() const;

  class Impl;

 private:
  explicit KvEventSubscriber(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_EVENTS_KV_EVENT_SUBSCRIBER_H_
