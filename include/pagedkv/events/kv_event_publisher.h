// Copyright 2026 The pagedkv Authors.
//
// KvEventPublisher: puts KV event batches on ZeroMQ the way vLLM's ZmqEventPublisher does, so a
// router written for vLLM subscribes to pagedkv unchanged.
//   - PUB socket, one message per batch in three frames: topic (bytes), sequence number (8 bytes,
//     big-endian, from 0), payload (kv_event_codec.h).
//   - ROUTER replay socket (optional): a client sends [empty frame, 8-byte big-endian start
//     sequence number] (a REQ socket adds the empty frame itself, a DEALER sends it); the publisher
//     answers with [empty, seq, payload] for every buffered batch with start <= seq < the next
//     number at the time of the request (what the client asked for, up to the buffer; batches
//     published meanwhile come live), then the end marker [empty, -1 as 8 signed big-endian bytes,
//     empty payload]. Answers are streamed a few batches per turn of the publisher thread, so live
//     batches are never held up behind a replay. Guards against a client that asks in a loop: at
//     most one answer in flight per client, a per-client token bucket (replay_burst requests, then
//     replay_requests_per_s), and at most max_concurrent_replays answers at once; a request past
//     any of them gets no answer (the client's own timeout applies) and is counted in stats().
//   - A bounded replay buffer (the last buffer_steps batches) and a publisher thread: Publish only
//     enqueues, so a slow or absent subscriber never stalls the engine. PUB drops messages past
//     its high-water mark on its own; when the queue to the thread is full, Publish drops the
//     batch and counts it.
//   - XPUB instead of PUB when wait_for_subscriber_ms > 0: the thread holds its first send until a
//     subscription has arrived (or the wait ran out), so a subscriber that connected before the
//     publisher existed receives every batch from 0. Publish still never blocks: batches queue.
//     Subscribers that come later recover what they missed through the replay socket.
// Endpoints follow vLLM's rule: bind when the address has '*' or '::' or is ipc:// / inproc://,
// else connect. The replay socket always binds.
//
// Difference from vLLM: the sequence number is taken when Publish is called, so a batch dropped
// at a full queue leaves a visible gap (vLLM numbers only the batches it sends, hiding drops);
// subscribers detect the gap, and the replay socket cannot fill it (see KvEventSubscriber).
//
// Thread safety: Publish, stats and the accessors may be called from any thread; Shutdown and
// the destructor from one thread, once. The sockets belong to the publisher thread.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto publisher, pagedkv::KvEventPublisher::Create(
//       {.endpoint = "tcp://*:5557", .replay_endpoint = "tcp://*:5558"}));
//   publisher->Publish(manager->TakeEventBatch());  // once per engine step
//   publisher->Shutdown();                           // flushes what is queued
#ifndef PAGEDKV_EVENTS_KV_EVENT_PUBLISHER_H_
#define PAGEDKV_EVENTS_KV_EVENT_PUBLISHER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/events/kv_event_codec.h"
#include "pagedkv/export.h"

namespace pagedkv {

struct PAGEDKV_EXPORT KvEventPublisherOptions {
  std::string endpoint = "tcp://*:5557";  // PUB address (bind or connect, see the banner)
  std::string replay_endpoint;            // ROUTER address for replays; empty = no replay
  int32_t buffer_steps = 10000;           // batches kept for replay; > 0
  int32_t hwm = 100000;                   // PUB send high-water mark (messages); > 0
  int32_t max_queue_size = 100000;        // batches waiting for the thread; more are dropped
  std::string topic;                      // first frame of every message
  KvEventCodecOptions codec;              // payload encoding and hash form
  int32_t shutdown_timeout_ms = 1000;     // how long Shutdown waits for the queue to drain
  int32_t data_parallel_rank = 0;         // put in batches that have none (vLLM's publisher does)
  int32_t wait_for_subscriber_ms = 0;     // > 0: hold the first send until a subscription arrives
  int32_t replay_burst = 4;               // replay requests a client may make back to back; > 0
  double replay_requests_per_s = 1.0;     // then this many per second per client; > 0
  int32_t max_concurrent_replays = 4;     // answers streamed at once (all clients); > 0
  int32_t replay_batches_per_turn = 256;  // batches one answer sends per thread turn; > 0
};

struct PAGEDKV_EXPORT KvEventPublisherStats {
  int64_t enqueued = 0;          // batches accepted by Publish
  int64_t published = 0;         // batches sent on the PUB socket
  int64_t dropped = 0;           // batches dropped because the queue was full (or after Shutdown)
  int64_t replay_requests = 0;   // replay requests answered (end marker sent)
  int64_t replayed_batches = 0;  // batches resent through the replay socket
  int64_t bad_replay_requests = 0;      // malformed replay requests (ignored)
  int64_t replay_requests_busy = 0;     // ignored: the client's previous answer was in flight
  int64_t replay_requests_limited = 0;  // ignored: past the client's rate or the concurrency cap
  int64_t replays_abandoned = 0;        // answers stopped because the client went away
  bool subscribed = false;              // with wait_for_subscriber_ms: a subscription arrived
};

class PAGEDKV_EXPORT KvEventPublisher {
 public:
  // Creates the sockets and starts the thread. InvalidArgument for bad options; Unavailable,
  // with ZeroMQ's reason, when an endpoint cannot be bound or connected.
  static absl::StatusOr<std::unique_ptr<KvEventPublisher>> Create(KvEventPublisherOptions options);

  ~KvEventPublisher();  // calls Shutdown
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Enqueues `batch` under the next sequence number, which it returns; never blocks. -1 when
  // the batch was dropped (queue full, or after Shutdown); counted in stats().dropped.
  int64_t Publish(KvEventBatch batch);

  // Waits until every batch enqueued so far has been sent (or dropped). False on timeout.
  bool Flush(int32_t timeout_ms);

  // Sends what is queued (waiting up to shutdown_timeout_ms), stops the thread, closes the
  // sockets. Idempotent.
  void Shutdown();

  KvEventPublisherStats stats() const;
  // The addresses actually bound or connected (e.g. the port chosen for tcp://127.0.0.1:*).
  const std::string& endpoint() const;
  const std::string& replay_endpoint() const;

  class Impl;

 private:
  explicit KvEventPublisher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The sequence-number frame: 8 bytes, big-endian; -1 is the replay end marker.
PAGEDKV_EXPORT std::string EncodeSequenceNumber(int64_t seq);
// InvalidArgument unless `frame` has exactly 8 bytes.
PAGEDKV_EXPORT absl::StatusOr<int64_t> DecodeSequenceNumber(std::string_view frame);

}  // namespace pagedkv

#endif  // PAGEDKV_EVENTS_KV_EVENT_PUBLISHER_H_
