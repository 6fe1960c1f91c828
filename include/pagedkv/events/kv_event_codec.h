// Copyright 2026 The pagedkv Authors.
//
// msgpack encoding of KV event batches in vLLM's KV-event schema, so consumers written for vLLM
// (vLLM's own KVEventBatch decoder, Dynamo's KV indexer, vllm-router's kv_aware policy, llm-d)
// follow pagedkv. Matched field for field against vllm/distributed/kv_events.py of vLLM 0.33.0;
// docs/kv_events.md shows the bytes.
//
// Three layouts (msgspec structs: EventBatch, and events tagged with "type"):
//   kVllm (the default; vLLM 0.33, array_like batches): the batch is [ts, events,
//     data_parallel_rank] (the rank omitted only when absent; KvEventPublisher always fills it,
//     as vLLM's publisher does); each event is a map whose first key is "type" ("BlockStored",
//     "BlockRemoved", "AllBlocksCleared"), then the fields in vLLM's order: BlockStored
//     {block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name} always,
//     then those of {extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window,
//     locality, ownership, session_id, lookahead_token_ids} that are set (msgspec's
//     omit_defaults); BlockRemoved {block_hashes, medium} then {group_idx, locality, ownership}.
//   kAllMap (vLLM before array_like batches): the batch is {"ts", "events",
//     "data_parallel_rank"?}; events as maps with only the first seven / two fields.
//   kAllArray (the older all-array layout): the batch is [ts, events, data_parallel_rank?]; each
//     event is an array led by its type name, then the first seven / two fields by position.
//
// Block hashes (ExternalBlockHash in vLLM: int or bytes). pagedkv's hashes are 128 bits:
//   kUint64: the low 64 bits as an unsigned integer. vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES
//     sends the last 8 bytes of its big-endian digest, i.e. its low 64 bits: the same projection.
//     This is what Dynamo's and llm-d's indexers expect (64-bit integers).
//   kBytes: the 16 bytes, big-endian (high word first), as vLLM sends its digests by default.
// The decoder accepts both encodings and both hash forms; a decoded hash is WireBlockHash of
// the original (for kBytes digests longer than 16 bytes, the last 16).
//
// Thread safety: the functions are thread-safe (no shared state).
//
// Example:
//   std::string payload = pagedkv::EncodeKvEventBatch(manager->TakeEventBatch(), {});
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::KvEventBatch batch, pagedkv::DecodeKvEventBatch(payload));
#ifndef PAGEDKV_EVENTS_KV_EVENT_CODEC_H_
#define PAGEDKV_EVENTS_KV_EVENT_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/export.h"

namespace pagedkv {

enum class KvEventEncoding {
  kVllm,      // vLLM 0.33: batch as an array, events as maps with a "type" field
  kAllMap,    // batch and events as maps (vLLM before array_like batches)
  kAllArray,  // batch and events as arrays, events led by the type name (older layout)
};

enum class KvBlockHashFormat {
  kUint64,  // low 64 bits, as an unsigned integer
  kBytes,   // 16 bytes, big-endian
};

struct PAGEDKV_EXPORT KvEventCodecOptions {
  KvEventEncoding encoding = KvEventEncoding::kVllm;           // layout of batches and events
  KvBlockHashFormat hash_format = KvBlockHashFormat::kUint64;  // how block hashes are sent
};

// "vllm" / "all-map" / "all-array"; "uint64" / "bytes". Parse* give InvalidArgument for other
// names; the names of older pagedkv versions ("map", "array") are refused with a message naming
// the new ones.
PAGEDKV_EXPORT std::string_view KvEventEncodingName(KvEventEncoding encoding);
PAGEDKV_EXPORT absl::StatusOr<KvEventEncoding> ParseKvEventEncoding(std::string_view name);
PAGEDKV_EXPORT std::string_view KvBlockHashFormatName(KvBlockHashFormat format);
PAGEDKV_EXPORT absl::StatusOr<KvBlockHashFormat> ParseKvBlockHashFormat(std::string_view name);

// What a consumer sees of `hash` under `format`: {low, 0} for kUint64, `hash` for kBytes.
// A router keys its index by this (see PrefixRouterIndex).
inline BlockHash WireBlockHash(const BlockHash& hash, KvBlockHashFormat format) {
  return format == KvBlockHashFormat::kUint64 ? BlockHash{hash.low, 0} : hash;
}

// The msgpack bytes of `batch`. Never fails.
PAGEDKV_EXPORT std::string EncodeKvEventBatch(const KvEventBatch& batch,
                                              const KvEventCodecOptions& options);

// Decodes a payload in any of the three layouts (the layout tells them apart) with hashes in either
// form. InvalidArgument, naming the offending field, for malformed msgpack, an unknown event type
// or a field of the wrong type; unknown map keys are ignored (newer vLLM fields).
PAGEDKV_EXPORT absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view payload);

}  // namespace pagedkv

#endif  // PAGEDKV_EVENTS_KV_EVENT_CODEC_H_
