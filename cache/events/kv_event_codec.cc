// Copyright 2026 The pagedkv Authors.
//
// msgpack codec of vLLM's KV-event schema; see include/pagedkv/events/kv_event_codec.h for the
// layout. Encoding writes with msgpack-cxx's packer (smallest integer forms, float64 timestamps, as
// msgspec does). Decoding walks msgpack-cxx's object tree; msgpack-cxx reports malformed input
// by throwing, which is caught here and returned as InvalidArgument (nothing escapes).
#include "pagedkv/events/kv_event_codec.h"

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

void PackOptInt(Packer& p, const std::optional<int64_t>& v) {
  if (v.has_value()) {
    p.pack_int64(*v);
  } else {
    p.pack_nil();
  }
}

// Writes an event's fields as a map (kVllm, kAllMap) or by position (kAllArray). Counts the
// fields first, so the header is right: `Field` is called twice per field, once per pass.
class EventWriter {
 public:
  EventWriter(Packer& p, bool map) : p_(p), map_(map) {}

  // Packs the header for `count` fields plus the tag, then the tag.
  void Begin(uint32_t count, std::string_view tag) {
    if (map_) {
      p_.pack_map(count + 1);
      PackStr(p_, "type");
    } else {
      p_.pack_array(count + 1);
    }
    PackStr(p_, tag);
  }
  void Key(std::string_view key) {
    if (map_) PackStr(p_, key);
  }
  Packer& p() { return p_; }

 private:
  Packer& p_;
  bool map_;
};

// vLLM 0.33's defaulted fields of a stored (`stored`) or removed event that are set, in vLLM's
// order; `emit(key, pack)` is called for each.
template <typename Emit>
void ForEachOptional(const KvBatchEvent& e, bool stored, Emit&& emit) {
  const auto opt_int = [&](std::string_view key, const std::optional<int32_t>& v) {
    if (v.has_value()) emit(key, [v](Packer& p) { p.pack_int64(*v); });
  };
  const auto opt_str = [&](std::string_view key, const std::optional<std::string>& v) {
    if (v.has_value()) emit(key, [&v](Packer& p) { PackStr(p, *v); });
  };
  opt_int("group_idx", e.group_idx);
  if (stored) {
    opt_str("kv_cache_spec_kind", e.kv_cache_spec_kind);
    opt_int("kv_cache_spec_sliding_window", e.kv_cache_spec_sliding_window);
  }
  opt_str("locality", e.locality);
  opt_str("ownership", e.ownership);
  if (stored) opt_str("session_id", e.session_id);
}

uint32_t NumOptional(const KvBatchEvent& e, bool stored, const KvEventCodecOptions& o) {
  if (o.encoding != KvEventEncoding::kVllm) return 0;
  uint32_t n = 0;
  ForEachOptional(e, stored, [&n](std::string_view, auto&&) { ++n; });
  return n;
}

void PackOptional(EventWriter& w, const KvBatchEvent& e, bool stored,
                  const KvEventCodecOptions& o) {
  if (o.encoding != KvEventEncoding::kVllm) return;
  ForEachOptional(e, stored, [&w](std::string_view key, auto&& pack) {
    w.Key(key);
    pack(w.p());
  });
}

void PackStored(Packer& p, const KvBatchEvent& e, const KvEventCodecOptions& o) {
  EventWriter w(p, o.encoding != KvEventEncoding::kAllArray);
  w.Begin(7 + NumOptional(e, /*stored=*/true, o), kStoredTag);
  w.Key("block_hashes");
  PackHashes(p, e.block_hashes, o.hash_format);
  w.Key("parent_block_hash");
  if (e.parent_block_hash.has_value()) {
    PackHash(p, *e.parent_block_hash, o.hash_format);
  } else {
    p.pack_nil();
  }
  w.Key("token_ids");
  p.pack_array(static_cast<uint32_t>(e.token_ids.size()));
  for (const TokenId t : e.token_ids) p.pack_int64(t);
  w.Key("block_size");
  p.pack_int64(e.block_size);
  w.Key("lora_id");
  PackOptInt(p, e.lora_id);
  w.Key("medium");
  PackOptStr(p, e.medium);
  w.Key("lora_name");
  PackOptStr(p, e.lora_name);
  PackOptional(w, e, /*stored=*/true, o);
}

void PackEvent(Packer& p, const KvBatchEvent& e, const KvEventCodecOptions& o) {
  EventWriter w(p, o.encoding != KvEventEncoding::kAllArray);
  switch (e.type) {
    case KvEventType::kBlockStored:
      PackStored(p, e, o);
      return;
    case KvEventType::kBlockRemoved:
      w.Begin(2 + NumOptional(e, /*stored=*/false, o), kRemovedTag);
      w.Key("block_hashes");
      PackHashes(p, e.block_hashes, o.hash_format);
      w.Key("medium");
      PackOptStr(p, e.medium);
      PackOptional(w, e, /*stored=*/false, o);
      return;
    case KvEventType::kAllBlocksCleared:
      w.Begin(0, kClearedTag);
      return;
  }
}

}  // namespace

std::string_view KvEventEncodingName(KvEventEncoding encoding) {
  switch (encoding) {
    case KvEventEncoding::kVllm:
      return "vllm";
    case KvEventEncoding::kAllMap:
      return "all-map";
    case KvEventEncoding::kAllArray:
      return "all-array";
  }
  return "vllm";
}

absl::StatusOr<KvEventEncoding> ParseKvEventEncoding(std::string_view name) {
  if (name == "vllm") return KvEventEncoding::kVllm;
  if (name == "all-map") return KvEventEncoding::kAllMap;
  if (name == "all-array") return KvEventEncoding::kAllArray;
  if (name == "map" || name == "array") {
    return absl::InvalidArgumentError(absl::StrCat(
        "KV event encoding '", std::string(name),
        "' was renamed: use vllm (the default, what vLLM 0.33 sends: the batch as an array, events "
        "as maps), all-map (what 'map' sent: batch and events as maps) or all-array (what 'array' "
        "sent)"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown KV event encoding '", std::string(name),
                                                 "'; use vllm, all-map or all-array"));
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
  const bool map = options.encoding == KvEventEncoding::kAllMap;
  const uint32_t fields = batch.data_parallel_rank.has_value() ? 3 : 2;
  if (map) {
    p.pack_map(fields);
  } else {
    p.pack_array(fields);
  }
  if (map) PackStr(p, "ts");
  PackFloat64(sink, batch.timestamp);
  if (map) PackStr(p, "events");
  p.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const KvBatchEvent& e : batch.events) PackEvent(p, e, options);
  if (batch.data_parallel_rank.has_value()) {
    if (map) PackStr(p, "data_parallel_rank");
    p.pack_int64(*batch.data_parallel_rank);
  }
  return out;
}

}  // namespace pagedkv
