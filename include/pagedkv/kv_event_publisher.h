// Copyright 2026 The pagedkv Authors.
//
// KvEventPublisher: puts KV event batches on ZeroMQ the way vLLM's ZmqEventPublisher does, so a
// router written for vLLM subscribes to pagedkv unchanged.
//   - PUB socket, one message per batch in three frames: topic (bytes), sequence number (8 bytes,
//     big-endian, from 0), payload (kv_event_codec.h).
//   - ROUTER replay socket (optional): a client sends [empty frame, 8-byte big-endian start
//     sequence number] (a REQ socket adds the empty frame itself, a DEALER sends it); the publisher
//     answers with [empty, seq, payload] for every buffered batch with seq >= start, then the end
//     marker [empty, -1 as 8 signed big-endian bytes, empty payload].
//   - A bounded replay buffer (the last buffer_steps batches) and a publisher thread: Publish only
//     enqueues, so a slow or absent subscriber never stalls the engine. PUB drops messages past
//     its high-water mark on its own; when the queue to the thread is full, Publish drops the
//     batch and counts it.
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
#ifndef PAGEDKV_KV_EVENT_PUBLISHER_H_
#define PAGEDKV_KV_EVENT_PUBLISHER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/kv_event_batch.h"
#include "pagedkv/kv_event_codec.h"

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
};

struct PAGEDKV_EXPORT KvEventPublisherStats {
  int64_t enqueued = 0;          // batches accepted by Publish
  int64_t published = 0;         // batches sent on the PUB socket
  int64_t dropped = 0;           // batches dropped because the queue was full (or after Shutdown)
  int64_t replay_requests = 0;   // replay requests answered
  int64_t replayed_batches = 0;  // batches resent through the replay socket
  int64_t bad_replay_requests = 0;  // malformed replay requests (ignored)
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

#endif  // PAGEDKV_KV_EVENT_PUBLISHER_H_
