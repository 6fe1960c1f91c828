// Copyright 2026 The pagedkv Authors.
//
// RedisTier (pagedkv/tiers/redis_tier.h) over RedisConnection and the value codec.
#include "pagedkv/tiers/redis_tier.h"

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/tiers/redis/redis_connection.h"
#include "cache/tiers/redis/remote_block_events.h"
#include "cache/tiers/tier_value_codec.h"
#include "pagedkv/status_macros.h"
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pagedkv {

struct RedisTier::Impl {
  Impl(RedisTierOptions o, std::function<void(const KvEvent&)> emit)
      : options(std::move(o)),
        conn(options),
        events({.medium = options.medium,
                .ttl_ms = options.ttl_seconds * 1000,
                .max_tracked_blocks = static_cast<size_t>(options.max_tracked_blocks)},
               std::move(emit)) {}
  RedisTierOptions options;
  RedisConnection conn;
  RemoteBlockEvents events;  // what this engine wrote and announced (see the header)
  std::string key_head;      // "<prefix>:<model>:"
  TierStats stats;
};

namespace {

absl::Status ValidateOptions(const RedisTierOptions& o) {
  if (o.key_prefix.empty()) {
    return absl::InvalidArgumentError("RedisTierOptions.key_prefix must not be empty");
  }
  if (o.connect_timeout_ms <= 0 || o.io_timeout_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisTierOptions: timeouts must be > 0 ms, got connect ",
                     o.connect_timeout_ms, ", io ", o.io_timeout_ms));
  }
  if (o.backoff_initial_ms <= 0 || o.backoff_max_ms < o.backoff_initial_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisTierOptions: need 0 < backoff_initial_ms <= backoff_max_ms, got ",
                     o.backoff_initial_ms, " and ", o.backoff_max_ms));
  }
  if (o.ttl_seconds < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisTierOptions.ttl_seconds must be >= 0, got ", o.ttl_seconds));
  }
  if (o.format.value_bytes <= 0 || o.format.block_size <= 0) {
    return absl::InvalidArgumentError(
        "RedisTierOptions.format needs value_bytes > 0 and block_size > 0");
  }
  if (o.store.threshold < 0) {
    return absl::InvalidArgumentError("RedisTierOptions.store.threshold must be >= 0");
  }
  if (o.ttl_seconds > INT64_MAX / 1000) {
    return absl::InvalidArgumentError(absl::StrCat("RedisTierOptions.ttl_seconds must be at most ",
                                                   INT64_MAX / 1000, ", got ", o.ttl_seconds));
  }
  if (o.max_tracked_blocks <= 0 || o.medium.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisTierOptions needs max_tracked_blocks > 0 (got ", o.max_tracked_blocks,
                     ") and a non-empty medium"));
  }
  return absl::OkStatus();
}

const redisReply* Element(const RedisConnection::Reply& array, size_t i) {
  return array->element[i];
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisTier>> RedisTier::Create(RedisTierOptions options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateOptions(options));
  // The tier does not exist yet: its events go through a slot the constructor fills.
  auto emit_to = std::make_shared<RedisTier*>(nullptr);
  auto impl = std::make_unique<Impl>(std::move(options), [emit_to](const KvEvent& e) {
    if (*emit_to != nullptr) (*emit_to)->Emit(e);
  });
  // Seeded with the value format's version: engines that write another version never meet.
  const uint64_t model =
      XXH3_64bits_withSeed(impl->options.model_fingerprint.data(),
                           impl->options.model_fingerprint.size(), kTierValueVersion);
  impl->key_head = absl::StrFormat("%s:%016x:", impl->options.key_prefix, model);
  auto tier = std::unique_ptr<RedisTier>(new RedisTier(std::move(impl)));
  *emit_to = tier.get();
  return tier;
}

RedisTier::RedisTier(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisTier::~RedisTier() = default;

std::string_view RedisTier::medium() const { return impl_->options.medium; }

int64_t RedisTier::NowMs() const {
  if (impl_->options.now_ms) return impl_->options.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const TierStoreOptions& RedisTier::store_options() const { return impl_->options.store; }
bool RedisTier::connected() const { return impl_->conn.connected(); }

std::string RedisTier::KeyOf(const BlockHash& hash) const {
  return absl::StrFormat("%s%016x%016x", impl_->key_head, hash.high, hash.low);
}

std::string RedisTier::EncodeValue(const TierStoreItem& item) const {
  return EncodeTierValue(impl_->options.format, item.block.tokens, item.value);
}

TierStats RedisTier::stats() const {
  TierStats s = impl_->stats;
  s.incidents += impl_->conn.incidents();
  s.resident_blocks = -1;  // shared with other engines: not known here
  s.resident_bytes = -1;
  return s;
}

absl::StatusOr<int64_t> RedisTier::LoadPrefix(std::span<const TierBlock> blocks,
                                              TierValueSink sink) {
  TierStats& st = impl_->stats;
  ++st.lookups;
  impl_->events.Expire(NowMs());
  if (blocks.empty()) return 0;
  std::vector<std::string> keys;
  keys.reserve(blocks.size());
  RedisConnection::Command mget = {"MGET"};
  for (const TierBlock& b : blocks) keys.push_back(KeyOf(b.hash));
  for (const std::string& k : keys) mget.push_back(k);
  absl::StatusOr<std::vector<RedisConnection::Reply>> replies = impl_->conn.Pipeline({mget});
  if (!replies.ok() || (*replies)[0]->type != REDIS_REPLY_ARRAY ||
      (*replies)[0]->elements != blocks.size()) {
    ++st.queried_blocks;
    ++st.faults;
    return 0;
  }
  const RedisConnection::Reply& array = (*replies)[0];
  for (size_t i = 0; i < blocks.size(); ++i) {  // every key read empty is known to be gone
    if (Element(array, i)->type == REDIS_REPLY_NIL) impl_->events.Gone(blocks[i].hash);
  }
  int64_t taken = 0;
  std::vector<std::string_view> bad_keys;
  absl::Status sink_error;
  for (size_t i = 0; i < blocks.size(); ++i) {
    ++st.queried_blocks;
    const redisReply* e = Element(array, i);
    if (e->type == REDIS_REPLY_NIL) break;
    const auto bytes =
        std::as_bytes(std::span<const char>(e->str, e->type == REDIS_REPLY_STRING ? e->len : 0));
    absl::StatusOr<std::span<const std::byte>> payload =
        DecodeTierValue(impl_->options.format, blocks[i].tokens, bytes);
    if (!payload.ok()) {
      ++st.faults;
      ++st.incidents;
      impl_->conn.Report(absl::StrCat("pagedkv: remote tier value ", keys[i], " rejected (",
                                      payload.status().message(),
                                      "); treated as a miss and deleted"));
      bad_keys.push_back(keys[i]);
      impl_->events.Gone(blocks[i].hash);
      break;
    }
    absl::StatusOr<bool> took = sink(static_cast<int64_t>(i), *payload);
    if (!took.ok()) {
      sink_error = took.status();
      break;
    }
    if (!*took) break;
    ++taken;
    ++st.hit_blocks;
    st.loaded_bytes += static_cast<int64_t>(payload->size());
  }
  if (!bad_keys.empty()) {
    RedisConnection::Command del = {"DEL"};
    del.insert(del.end(), bad_keys.begin(), bad_keys.end());
    if (!impl_->conn.Pipeline({del}).ok()) ++st.faults;
  }
  if (!sink_error.ok()) return sink_error;
  return taken;
}

absl::Status RedisTier::Store(std::span<const TierStoreItem> items) {
  const TierValueFormat& f = impl_->options.format;
  for (const TierStoreItem& item : items) {
    if (static_cast<int64_t>(item.value.size()) != f.value_bytes ||
        static_cast<int64_t>(item.block.tokens.size()) != f.block_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("RedisTier::Store: a value of ", item.value.size(), " bytes for ",
                       item.block.tokens.size(), " tokens; this tier holds ", f.value_bytes,
                       "-byte values of ", f.block_size, "-token blocks"));
    }
  }
  if (items.empty()) return absl::OkStatus();
  std::vector<std::string> keys, values;
  keys.reserve(items.size());
  values.reserve(items.size());
  const std::string ttl = absl::StrCat(impl_->options.ttl_seconds);
  std::vector<RedisConnection::Command> commands;
  for (const TierStoreItem& item : items) {
    keys.push_back(KeyOf(item.block.hash));
    values.push_back(EncodeValue(item));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    commands.push_back({"SET", keys[i], values[i], "NX"});
    if (impl_->options.ttl_seconds > 0) {
      commands.back().push_back("EX");
      commands.back().push_back(ttl);
    }
  }
  TierStats& st = impl_->stats;
  const int64_t now = NowMs();
  impl_->events.Expire(now);
  absl::StatusOr<std::vector<RedisConnection::Reply>> replies = impl_->conn.Pipeline(commands);
  if (!replies.ok()) {
    st.faults += static_cast<int64_t>(items.size());
    return absl::OkStatus();  // a fault drops the stores; the request goes on
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if ((*replies)[i]->type == REDIS_REPLY_NIL) {
      ++st.store_skipped;  // held already (another engine's, or ours): not announced again
    } else {
      ++st.stored_blocks;
      st.stored_bytes += static_cast<int64_t>(values[i].size());
      if (HasListeners()) impl_->events.Written(items[i].block.hash, items[i].block.tokens, now);
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
