// Copyright 2026 The pagedkv Authors.
//
// RedisTier: KV blocks in a Redis server, shared by every engine pointed at it, on one machine or
// many (KvTier, kv_tier.h). Library pagedkv::tier_redis (hiredis); built with
// -DPAGEDKV_BUILD_REDIS=ON (the default), and linked by the engine only then.
//
// Keys: "<key_prefix>:<model>:<hash>", where <model> is 16 hex digits of XXH3-64 of the model
// fingerprint (seeded with the value format's version) and <hash> the block's 128-bit chain hash in
// 32 hex digits. The chain hash is portable (its root is fixed and holds the salt and the
// fingerprint), so two processes that compute the same block use the same key, and tenants with
// other salts or engines with other models never meet. Values: a 64-byte header (magic "PKVB",
// format version, dtype, layout, block size, layer count, token count, layout digest, payload
// bytes, and an XXH3-64 checksum of the tokens and the payload seeded with the rest of the header),
// the block's token ids, then the payload (cache/tiers/tier_value_codec.h). Reads check all of it
// against the request: anything else is a miss, the key is deleted, and the incident is reported
// once.
//
// Traffic: LoadPrefix is one MGET of every key asked for; Store is one pipeline of
// SET key value NX [EX ttl]. Connection: connect and I/O timeouts; AUTH user password (or the
// password alone) and SELECT db from the URL. An unreachable or slow server, a timeout or an
// error reply makes the call a miss (or a dropped store); the tier then disconnects and retries
// only after a backoff that doubles from backoff_initial_ms up to backoff_max_ms, and every call
// in between is a miss without a network round trip. An incident (the first fault after a
// success) is reported once through options.report; the recovery too.
//
// Events (AddEventListener; medium options.medium, "EXTERNAL" by default, the name Dynamo's KV
// router gives a shared tier; the host tier's is vLLM's "CPU"). The store is shared, so the tier
// reports only what this engine did or saw: kBlockStored when its own SET NX wrote a block, and
// kBlockRemoved for a block it announced once it learns the block is gone (its key read empty
// or rejected, its TTL passed, or it was forgotten because max_tracked_blocks were tracked).
// Invisible, so never reported: other engines' writes, Redis evictions and deletions until this
// engine next reads the key, anything while the server is unreachable
// (cache/tiers/redis/remote_block_events.h). Blocks are tracked only while listeners are
// registered.
//
// Not thread-safe (one connection, used by the engine thread).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::RedisEndpoint where,
//                            pagedkv::ParseRedisUrl("redis://app:secret@10.0.0.5:6379/2"));
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::RedisTier> remote,
//                            pagedkv::RedisTier::Create({.endpoint = where,
//                                                        .model_fingerprint = fingerprint,
//                                                        .format = format}));
#ifndef PAGEDKV_TIERS_REDIS_TIER_H_
#define PAGEDKV_TIERS_REDIS_TIER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv {

// Where a Redis server is.
struct PAGEDKV_EXPORT RedisEndpoint {
  std::string host = "127.0.0.1";
  int32_t port = 6379;
  std::string user = {};      // ACL user (Redis 6+); empty: AUTH with the password alone
  std::string password = {};  // empty: no AUTH
  int32_t db = 0;             // SELECT db (0: none sent)
};

// "redis://[[user]:password@]host[:port][/db]" (user and password percent-decoded).
// InvalidArgument saying what is wrong for anything else (other scheme, bad port or db).
PAGEDKV_EXPORT absl::StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url);

struct PAGEDKV_EXPORT RedisTierOptions {
  RedisEndpoint endpoint = {};
  std::string key_prefix = "pagedkv";  // key-space prefix (no ':' needed)
  std::string model_fingerprint;       // the engine's; hashed into every key
  TierValueFormat format = {};         // what values must be (see kv_tier.h)
  int64_t ttl_seconds = 0;             // > 0: SET ... EX ttl_seconds; 0: keys never expire
  int32_t connect_timeout_ms = 200;    // > 0
  int32_t io_timeout_ms = 200;         // > 0: per reply
  int32_t backoff_initial_ms = 100;    // > 0: wait before the first reconnect attempt
  int32_t backoff_max_ms = 5000;       // >= backoff_initial_ms
  TierStoreOptions store = {};         // read by the engine (see kv_tier.h)
  std::string medium = "EXTERNAL";     // KvTier::medium(), the events' medium
  int64_t max_tracked_blocks = int64_t{1} << 20;  // > 0: blocks remembered for removed events
  // One line per incident and per recovery; null: to stderr ("pagedkv: remote tier ...").
  std::function<void(std::string_view)> report = nullptr;
  // Monotonic milliseconds for the backoff; null: std::chrono::steady_clock. (Tests set it.)
  std::function<int64_t()> now_ms = nullptr;
};

class PAGEDKV_EXPORT RedisTier final : public KvTier {
 public:
  // InvalidArgument for bad options (timeouts, backoff, negative TTL, an empty key prefix, a
  // format without value_bytes or block_size). Does not connect: a server that is down at start
  // is a fault like any other (the first call reports it).
  static absl::StatusOr<std::unique_ptr<RedisTier>> Create(RedisTierOptions options);
  ~RedisTier() override;

  std::string_view name() const override { return "remote"; }
  std::string_view medium() const override;
  const TierStoreOptions& store_options() const override;
  absl::StatusOr<int64_t> LoadPrefix(std::span<const TierBlock> blocks,
                                     TierValueSink sink) override;
  absl::Status Store(std::span<const TierStoreItem> items) override;
  TierStats stats() const override;

  // The key of `hash` ("<prefix>:<model>:<hash>").
  std::string KeyOf(const BlockHash& hash) const;
  // The value Store writes for `item` (header, tokens, payload). For tests and tools.
  std::string EncodeValue(const TierStoreItem& item) const;
  // Whether a connection is up now.
  bool connected() const;

 private:
  struct Impl;
  explicit RedisTier(std::unique_ptr<Impl> impl);
  int64_t NowMs() const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_TIERS_REDIS_TIER_H_
