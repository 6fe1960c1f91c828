// Copyright 2026 The pagedkv Authors.
#include "engine/tools/cli/kv_events_flags.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cli {

void AddKvEventsFlags(CLI::App* cmd, KvEventsFlags* flags) {
  cmd->add_option("--kv-events-endpoint", flags->endpoint,
                  "Publish KV event batches in vLLM's format on this ZeroMQ PUB address (e.g. "
                  "tcp://*:5557, ipc:///tmp/kv); bound when it has * or is ipc://, else connected");
  cmd->add_option("--kv-events-replay-endpoint", flags->replay_endpoint,
                  "ROUTER address answering replay requests (e.g. tcp://*:5558)");
  cmd->add_option("--kv-events-topic", flags->topic, "Topic frame of every message");
  cmd->add_option("--kv-events-encoding", flags->encoding,
                  "vllm (what vLLM 0.33 sends: the batch [ts, events, rank] as an array, events as "
                  "maps with a type field), all-map (batch and events as maps; was 'map') or "
                  "all-array (batch and events as arrays; was 'array')")
      ->capture_default_str();
  cmd->add_option("--kv-events-hash", flags->hash,
                  "Block hashes as uint64 (low 64 bits, what Dynamo / llm-d expect) or bytes (all "
                  "16 bytes, big-endian)")
      ->capture_default_str();
  cmd->add_option("--kv-events-buffer-steps", flags->buffer_steps,
                  "Batches kept for replay requests")
      ->capture_default_str();
  cmd->add_option("--kv-events-wait-subscriber-s", flags->wait_subscriber_seconds,
                  "Hold the first batch until a subscriber's subscription arrives, at most this "
                  "long (0: send at once; late subscribers recover through the replay socket)")
      ->capture_default_str();
  cmd->add_option("--kv-events-hold-s", flags->hold_seconds,
                  "Keep the event sockets open this long after the run (late subscribers)")
      ->capture_default_str();
}

absl::StatusOr<std::unique_ptr<KvEventPublisher>> MakeKvEventPublisher(const KvEventsFlags& flags) {
  if (flags.endpoint.empty()) {
    if (!flags.replay_endpoint.empty()) {
      return absl::InvalidArgumentError("--kv-events-replay-endpoint needs --kv-events-endpoint");
    }
    return std::unique_ptr<KvEventPublisher>();
  }
  if (!(flags.wait_subscriber_seconds >= 0 && flags.wait_subscriber_seconds <= 3600)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-events-wait-subscriber-s must be in [0, 3600], got ", flags.wait_subscriber_seconds));
  }
  KvEventPublisherOptions options{
      .endpoint = flags.endpoint,
      .replay_endpoint = flags.replay_endpoint,
      .buffer_steps = flags.buffer_steps,
      .topic = flags.topic,
      .wait_for_subscriber_ms = static_cast<int32_t>(flags.wait_subscriber_seconds * 1000)};
  PAGEDKV_ASSIGN_OR_RETURN(options.codec.encoding, ParseKvEventEncoding(flags.encoding));
  PAGEDKV_ASSIGN_OR_RETURN(options.codec.hash_format, ParseKvBlockHashFormat(flags.hash));
  return KvEventPublisher::Create(std::move(options));
}

void FinishKvEventPublisher(const KvEventsFlags& flags, KvEventPublisher* publisher) {
  if (publisher == nullptr) return;
  publisher->Flush(10000);  // on timeout, Shutdown counts what is left as dropped
  if (flags.hold_seconds > 0) {
    // Deliberate wait: the publisher thread keeps answering replay requests meanwhile.
    std::this_thread::sleep_for(std::chrono::duration<double>(flags.hold_seconds));
  }
  publisher->Shutdown();
}

}  // namespace pagedkv::cli
