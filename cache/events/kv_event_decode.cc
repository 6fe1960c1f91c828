// Copyright 2026 The pagedkv Authors.
//
// DecodeKvEventBatch (include/pagedkv/events/kv_event_codec.h). All three layouts are first turned
// into a name -> value table (array positions get vLLM's field names), then one decoder per event
// type reads the table, so the two encodings cannot drift apart.
#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "msgpack.hpp"
#include "pagedkv/events/kv_event_codec.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using Object = msgpack::object;
using Fields = absl::flat_hash_map<std::string_view, const Object*>;

// vLLM's field order (the array encoding's positions after the type name).
const std::vector<std::string_view>& FieldOrder(KvEventType type) {
  static const auto* const kStored =
      new std::vector<std::string_view>{"block_hashes",
                                        "parent_block_hash",
                                        "token_ids",
                                        "block_size",
                                        "lora_id",
                                        "medium",
                                        "lora_name",
                                        "extra_keys",
                                        "group_idx",
                                        "kv_cache_spec_kind",
                                        "kv_cache_spec_sliding_window",
                                        "locality",
                                        "ownership",
                                        "session_id",
                                        "lookahead_token_ids"};
  static const auto* const kRemoved = new std::vector<std::string_view>{
      "block_hashes", "medium", "group_idx", "locality", "ownership"};
  static const auto* const kCleared = new std::vector<std::string_view>{};
  switch (type) {
    case KvEventType::kBlockStored:
      return *kStored;
    case KvEventType::kBlockRemoved:
      return *kRemoved;
    case KvEventType::kAllBlocksCleared:
      return *kCleared;
  }
  return *kCleared;
}

absl::Status Bad(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("KV event batch: ", std::string(field), " ", std::string(what)));
}

std::string_view StrOf(const Object& o) { return std::string_view(o.via.str.ptr, o.via.str.size); }

absl::StatusOr<int64_t> ToInt(const Object& o, std::string_view field) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) return Bad(field, "is out of range");
    return static_cast<int64_t>(o.via.u64);
  }
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
  return Bad(field, "must be an integer");
}

absl::StatusOr<BlockHash> ToHash(const Object& o, std::string_view field) {
  if (o.type == msgpack::type::POSITIVE_INTEGER) return BlockHash{o.via.u64, 0};
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    return BlockHash{static_cast<uint64_t>(o.via.i64), 0};
  }
  if (o.type != msgpack::type::BIN || o.via.bin.size == 0) {
    return Bad(field, "must be an integer or bytes");
  }
  // The last 16 bytes, big-endian (shorter digests fill the low bytes).
  BlockHash h;
  const uint32_t n = o.via.bin.size;
  const uint32_t start = n > 16 ? n - 16 : 0;
  for (uint32_t i = start; i < n; ++i) {
    const uint64_t byte = static_cast<unsigned char>(o.via.bin.ptr[i]);
    h.high = (h.high << 8) | (h.low >> 56);
    h.low = (h.low << 8) | byte;
  }
  return h;
}

absl::StatusOr<std::vector<BlockHash>> ToHashes(const Object& o, std::string_view field) {
  if (o.type != msgpack::type::ARRAY) return Bad(field, "must be an array");
  std::vector<BlockHash> out;
  out.reserve(o.via.array.size);
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    absl::StatusOr<BlockHash> h = ToHash(o.via.array.ptr[i], field);
    if (!h.ok()) return h.status();
    out.push_back(*h);
  }
  return out;
}

absl::StatusOr<std::optional<std::string>> ToOptStr(const Object* o, std::string_view field) {
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<std::string>();
  if (o->type != msgpack::type::STR) return Bad(field, "must be a string or nil");
  return std::optional<std::string>(std::string(StrOf(*o)));
}

const Object* Find(const Fields& f, std::string_view name) {
  const auto it = f.find(name);
  return it == f.end() ? nullptr : it->second;
}

absl::Status DecodeStoredTail(const Fields& f, KvBatchEvent& e) {
  const Object* tokens = Find(f, "token_ids");
  if (tokens == nullptr || tokens->type != msgpack::type::ARRAY) {
    return Bad("BlockStored.token_ids", "must be an array");
  }
  for (uint32_t i = 0; i < tokens->via.array.size; ++i) {
    absl::StatusOr<int64_t> t = ToInt(tokens->via.array.ptr[i], "BlockStored.token_ids");
    if (!t.ok()) return t.status();
    e.token_ids.push_back(static_cast<TokenId>(*t));
  }
  const Object* bs = Find(f, "block_size");
  if (bs == nullptr) return Bad("BlockStored.block_size", "is missing");
  absl::StatusOr<int64_t> block_size = ToInt(*bs, "BlockStored.block_size");
  if (!block_size.ok()) return block_size.status();
  e.block_size = static_cast<int32_t>(*block_size);
  const Object* lora = Find(f, "lora_id");
  if (lora != nullptr && lora->type != msgpack::type::NIL) {
    absl::StatusOr<int64_t> id = ToInt(*lora, "BlockStored.lora_id");
    if (!id.ok()) return id.status();
    e.lora_id = *id;
  }
  absl::StatusOr<std::optional<std::string>> name =
      ToOptStr(Find(f, "lora_name"), "BlockStored.lora_name");
  if (!name.ok()) return name.status();
  e.lora_name = *std::move(name);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<int32_t>> ToOptInt32(const Object* o, std::string_view field) {
  if (o == nullptr || o->type == msgpack::type::NIL) return std::optional<int32_t>();
  absl::StatusOr<int64_t> v = ToInt(*o, field);
  if (!v.ok()) return v.status();
  if (*v < INT32_MIN || *v > INT32_MAX) return Bad(field, "is out of range");
  return std::optional<int32_t>(static_cast<int32_t>(*v));
}

// vLLM 0.33's defaulted fields (extra_keys and lookahead_token_ids are skipped).
absl::Status DecodeOptional(const Fields& f, KvBatchEvent& e) {
  PAGEDKV_ASSIGN_OR_RETURN(e.group_idx, ToOptInt32(Find(f, "group_idx"), "group_idx"));
  PAGEDKV_ASSIGN_OR_RETURN(e.locality, ToOptStr(Find(f, "locality"), "locality"));
  PAGEDKV_ASSIGN_OR_RETURN(e.ownership, ToOptStr(Find(f, "ownership"), "ownership"));
  if (e.type != KvEventType::kBlockStored) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(e.kv_cache_spec_kind,
                           ToOptStr(Find(f, "kv_cache_spec_kind"), "kv_cache_spec_kind"));
  PAGEDKV_ASSIGN_OR_RETURN(
      e.kv_cache_spec_sliding_window,
      ToOptInt32(Find(f, "kv_cache_spec_sliding_window"), "kv_cache_spec_sliding_window"));
  PAGEDKV_ASSIGN_OR_RETURN(e.session_id, ToOptStr(Find(f, "session_id"), "session_id"));
  return absl::OkStatus();
}

absl::StatusOr<KvBatchEvent> DecodeFields(KvEventType type, const Fields& f) {
  KvBatchEvent e{.type = type};
  if (type == KvEventType::kAllBlocksCleared) return e;
  const Object* hashes = Find(f, "block_hashes");
  if (hashes == nullptr) return Bad("block_hashes", "is missing");
  absl::StatusOr<std::vector<BlockHash>> hs = ToHashes(*hashes, "block_hashes");
  if (!hs.ok()) return hs.status();
  e.block_hashes = *std::move(hs);
  absl::StatusOr<std::optional<std::string>> medium = ToOptStr(Find(f, "medium"), "medium");
  if (!medium.ok()) return medium.status();
  e.medium = *std::move(medium);
  PAGEDKV_RETURN_IF_ERROR(DecodeOptional(f, e));
  if (type == KvEventType::kBlockRemoved) return e;
  const Object* parent = Find(f, "parent_block_hash");
  if (parent != nullptr && parent->type != msgpack::type::NIL) {
    absl::StatusOr<BlockHash> h = ToHash(*parent, "BlockStored.parent_block_hash");
    if (!h.ok()) return h.status();
    e.parent_block_hash = *h;
  }
  absl::Status tail = DecodeStoredTail(f, e);
  if (!tail.ok()) return tail;
  return e;
}

absl::StatusOr<KvEventType> TypeOf(const Object* tag) {
  if (tag == nullptr || tag->type != msgpack::type::STR) {
    return Bad("event type", "must be a string (BlockStored, BlockRemoved, AllBlocksCleared)");
  }
  const std::string_view name = StrOf(*tag);
  if (name == "BlockStored") return KvEventType::kBlockStored;
  if (name == "BlockRemoved") return KvEventType::kBlockRemoved;
  if (name == "AllBlocksCleared") return KvEventType::kAllBlocksCleared;
  return Bad("event type", absl::StrCat("'", std::string(name), "' is unknown"));
}

absl::StatusOr<KvBatchEvent> DecodeEvent(const Object& o) {
  Fields fields;
  const Object* tag = nullptr;
  if (o.type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) return Bad("event", "has a non-string key");
      fields[StrOf(kv.key)] = &kv.val;
    }
    tag = Find(fields, "type");
  } else if (o.type == msgpack::type::ARRAY && o.via.array.size > 0) {
    tag = &o.via.array.ptr[0];
  } else {
    return Bad("event", "must be a map or a non-empty array");
  }
  absl::StatusOr<KvEventType> type = TypeOf(tag);
  if (!type.ok()) return type.status();
  if (o.type == msgpack::type::ARRAY) {
    const std::vector<std::string_view>& order = FieldOrder(*type);
    for (uint32_t i = 1; i < o.via.array.size && i - 1 < order.size(); ++i) {
      fields[order[i - 1]] = &o.via.array.ptr[i];
    }
  }
  return DecodeFields(*type, fields);
}

absl::StatusOr<KvEventBatch> DecodeBatch(const Object& root) {
  const Object* ts = nullptr;
  const Object* events = nullptr;
  const Object* rank = nullptr;
  if (root.type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < root.via.map.size; ++i) {
      const msgpack::object_kv& kv = root.via.map.ptr[i];
      if (kv.key.type != msgpack::type::STR) return Bad("batch", "has a non-string key");
      const std::string_view key = StrOf(kv.key);
      if (key == "ts") ts = &kv.val;
      if (key == "events") events = &kv.val;
      if (key == "data_parallel_rank") rank = &kv.val;
    }
  } else if (root.type == msgpack::type::ARRAY && root.via.array.size >= 2) {
    ts = &root.via.array.ptr[0];
    events = &root.via.array.ptr[1];
    if (root.via.array.size >= 3) rank = &root.via.array.ptr[2];
  } else {
    return Bad("batch", "must be a map or an array [ts, events, data_parallel_rank?]");
  }
  KvEventBatch batch;
  if (ts == nullptr) return Bad("ts", "is missing");
  if (ts->type == msgpack::type::FLOAT64 || ts->type == msgpack::type::FLOAT32) {
    batch.timestamp = ts->via.f64;
  } else {
    absl::StatusOr<int64_t> t = ToInt(*ts, "ts");
    if (!t.ok()) return Bad("ts", "must be a number");
    batch.timestamp = static_cast<double>(*t);
  }
  if (events == nullptr || events->type != msgpack::type::ARRAY) {
    return Bad("events", "must be an array");
  }
  for (uint32_t i = 0; i < events->via.array.size; ++i) {
    absl::StatusOr<KvBatchEvent> e = DecodeEvent(events->via.array.ptr[i]);
    if (!e.ok()) return e.status();
    batch.events.push_back(*std::move(e));
  }
  if (rank != nullptr && rank->type != msgpack::type::NIL) {
    absl::StatusOr<int64_t> r = ToInt(*rank, "data_parallel_rank");
    if (!r.ok()) return r.status();
    batch.data_parallel_rank = static_cast<int32_t>(*r);
  }
  return batch;
}

}  // namespace

absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::string_view payload) {
  msgpack::object_handle handle;
  try {
    size_t offset = 0;
    // Every element takes at least one byte, so no container may count more elements than the
    // payload has bytes; without this limit a 5-byte header claiming 2^32 entries makes the
    // unpacker allocate them up front.
    const size_t most = std::max<size_t>(payload.size(), 1);
    const msgpack::unpack_limit limit(/*array=*/most, /*map=*/most, /*str=*/most, /*bin=*/most,
                                      /*ext=*/most, /*depth=*/64);
    msgpack::unpack(handle, payload.data(), payload.size(), offset, nullptr, nullptr, limit);
    if (offset != payload.size()) {
      return Bad("payload", absl::StrCat("has ", payload.size() - offset, " trailing bytes"));
    }
  } catch (const std::exception& e) {
    return Bad("payload", absl::StrCat("is not valid msgpack (", e.what(), ")"));
  }
  return DecodeBatch(handle.get());
}

}  // namespace pagedkv
