// Copyright 2026 The pagedkv Authors.
//
// msgpack codec of vLLM's KV-event schema; see include/pagedkv/kv_event_codec.h for the layout.
// Encoding writes with msgpack-cxx's packer (smallest integer forms, float64 timestamps, as
// msgspec does). Decoding walks msgpack-cxx's object tree; msgpack-cxx reports malformed input
// by throwing, which is caught here and returned as InvalidArgument (nothing escapes).
#include "pagedkv/kv_event_codec.h"

#include <cstring>
#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "msgpack.hpp"

namespace pagedkv {
namespace {

constexpr char kStoredTag[] = "BlockStored";
constexpr char kRemovedTag[] = "BlockRemoved";
constexpr char kClearedTag[] = "AllBlocksCleared";

// A msgpack output stream over std::string.
struct StringSink {
  std::string* out;
  void write(const char* data, size_t size) { out->append(data, size); }
};
using Packer = msgpack::packer<StringSink>;

void PackStr(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

// Always float64 (0xcb), as msgspec sends Python floats; msgpack-cxx's pack_double would send a
// whole number as an integer.
void PackFloat64(StringSink& sink, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  char bytes[9];
  bytes[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) bytes[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  sink.write(bytes, sizeof(bytes));
}

void PackHash(Packer& p, const BlockHash& h, KvBlockHashFormat format) {
  if (format == KvBlockHashFormat::kUint64) {
    p.pack_uint64(h.low);
    return;
  }
  char bytes[16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>(h.high >> (56 - 8 * i));
    bytes[8 + i] = static_cast<char>(h.low >> (56 - 8 * i));
  }
  p.pack_bin(16);
  p.pack_bin_body(bytes, 16);
}

void PackHashes(Packer& p, const std::vector<BlockHash>& hashes, KvBlockHashFormat format) {
  p.pack_array(static_cast<uint32_t>(hashes.size()));
  for (const BlockHash& h : hashes) PackHash(p, h, format);
}

void PackOptStr(Packer& p, const std::optional<std::string>& s) {
  if (s.has_value()) {
    PackStr(p, *s);
  } else {
    p.pack_nil();
  }
}

// Packs `key` first when the event is a map (no key in the array encoding).
void Key(Packer& p, bool map, std::string_view key) {
  if (map) PackStr(p, key);
}

void PackStored(Packer& p, const KvBatchEvent& e, const KvEventCodecOptions& o) {
  const bool map = o.encoding == KvEventEncoding::kMap;
  if (map) {
    p.pack_map(8);
    PackStr(p, "type");
  } else {
    p.pack_array(8);
  }
  PackStr(p, kStoredTag);
  Key(p, map, "block_hashes");
  PackHashes(p, e.block_hashes, o.hash_format);
  Key(p, map, "parent_block_hash");
  if (e.parent_block_hash.has_value()) {
    PackHash(p, *e.parent_block_hash, o.hash_format);
  } else {
    p.pack_nil();
  }
  Key(p, map, "token_ids");
  p.pack_array(static_cast<uint32_t>(e.token_ids.size()));
  for (const TokenId t : e.token_ids) p.pack_int64(t);
  Key(p, map, "block_size");
  p.pack_int64(e.block_size);
  Key(p, map, "lora_id");
  if (e.lora_id.has_value()) {
    p.pack_int64(*e.lora_id);
  } else {
    p.pack_nil();
  }
  Key(p, map, "medium");
  PackOptStr(p, e.medium);
  Key(p, map, "lora_name");
  PackOptStr(p, e.lora_name);
}

void PackEvent(Packer& p, const KvBatchEvent& e, const KvEventCodecOptions& o) {
  const bool map = o.encoding == KvEventEncoding::kMap;
  switch (e.type) {
    case KvEventType::kBlockStored:
      PackStored(p, e, o);
      return;
    case KvEventType::kBlockRemoved:
      if (map) {
        p.pack_map(3);
        PackStr(p, "type");
      } else {
        p.pack_array(3);
      }
      PackStr(p, kRemovedTag);
      Key(p, map, "block_hashes");
      PackHashes(p, e.block_hashes, o.hash_format);
      Key(p, map, "medium");
      PackOptStr(p, e.medium);
      return;
    case KvEventType::kAllBlocksCleared:
      if (map) {
        p.pack_map(1);
        PackStr(p, "type");
      } else {
        p.pack_array(1);
      }
      PackStr(p, kClearedTag);
      return;
  }
}

}  // namespace

std::string_view KvEventEncodingName(KvEventEncoding encoding) {
  return encoding == KvEventEncoding::kMap ? "map" : "array";
}

absl::StatusOr<KvEventEncoding> ParseKvEventEncoding(std::string_view name) {
  if (name == "map") return KvEventEncoding::kMap;
  if (name == "array") return KvEventEncoding::kTaggedArray;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KV event encoding '", std::string(name), "'; use map or array"));
}

std::string_view KvBlockHashFormatName(KvBlockHashFormat format) {
  return format == KvBlockHashFormat::kUint64 ? "uint64" : "bytes";
}

absl::StatusOr<KvBlockHashFormat> ParseKvBlockHashFormat(std::string_view name) {
  if (name == "uint64") return KvBlockHashFormat::kUint64;
  if (name == "bytes") return KvBlockHashFormat::kBytes;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown block hash format '", std::string(name), "'; use uint64 or bytes"));
}

std::string EncodeKvEventBatch(const KvEventBatch& batch, const KvEventCodecOptions& options) {
  std::string out;
  StringSink sink{&out};
  Packer p(sink);
  const bool map = options.encoding == KvEventEncoding::kMap;
  const uint32_t fields = batch.data_parallel_rank.has_value() ? 3 : 2;
  if (map) {
    p.pack_map(fields);
  } else {
    p.pack_array(fields);
  }
  Key(p, map, "ts");
  PackFloat64(sink, batch.timestamp);
  Key(p, map, "events");
  p.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const KvBatchEvent& e : batch.events) PackEvent(p, e, options);
  if (batch.data_parallel_rank.has_value()) {
    Key(p, map, "data_parallel_rank");
    p.pack_int64(*batch.data_parallel_rank);
  }
  return out;
}

}  // namespace pagedkv
