// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: decoding KV event batches from msgpack (what a router reads off the wire, in
// either of vLLM's encodings). Hostile payloads must be errors; a payload that decodes must
// re-encode and decode to the same batch.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "pagedkv/events/kv_event_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  auto batch = pagedkv::DecodeKvEventBatch(payload);
  if (!batch.ok()) return 0;
  const std::string encoded = pagedkv::EncodeKvEventBatch(*batch, {});
  auto again = pagedkv::DecodeKvEventBatch(encoded);
  if (!again.ok() || again->events.size() != batch->events.size()) std::abort();
  return 0;
}
