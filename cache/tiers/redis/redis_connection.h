// Copyright 2026 The pagedkv Authors.
//
// RedisConnection: one hiredis connection with timeouts, AUTH / SELECT, pipelining, and the
// fault policy of the Redis tier (pagedkv/tiers/redis_tier.h): a failed call drops the connection
// and starts a backoff (doubling up to a maximum) during which calls fail at once without a round
// trip; the first fault after a success is reported once, and so is the recovery.
//
// Example:
//   RedisConnection conn(options);
//   absl::StatusOr<std::vector<RedisConnection::Reply>> r = conn.Pipeline({{"PING"}});
//   if (!r.ok()) { /* a fault: count a miss */ }
//
// Not thread-safe.
#ifndef PAGEDKV_CACHE_TIERS_REDIS_REDIS_CONNECTION_H_
#define PAGEDKV_CACHE_TIERS_REDIS_REDIS_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/tiers/redis_tier.h"

struct redisContext;
struct redisReply;

namespace pagedkv {

class RedisConnection {
 public:
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
  // One command: its arguments (binary safe).
  using Command = std::vector<std::string_view>;

  explicit RedisConnection(const RedisTierOptions& options);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends every command in one write and reads one reply per command. Unavailable (a fault:
  // the connection is dropped, the backoff starts, an incident is reported if it is the first)
  // when the server cannot be reached, times out, or answers a command with an error.
  absl::StatusOr<std::vector<Reply>> Pipeline(const std::vector<Command>& commands);

  bool connected() const { return ctx_ != nullptr; }
  int64_t incidents() const { return incidents_; }
  // Reports `line` through the options' reporter.
  void Report(std::string_view line) const;

 private:
  absl::Status Connect();
  absl::Status Authenticate();
  absl::Status Fail(std::string_view reason);
  int64_t NowMs() const;
  std::string Where() const;

  const RedisTierOptions& options_;
  redisContext* ctx_ = nullptr;
  bool healthy_ = true;          // no fault since the last success
  int64_t next_attempt_ms_ = 0;  // no connect before this time
  int64_t backoff_ms_ = 0;       // the next backoff
  int64_t incidents_ = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_REDIS_REDIS_CONNECTION_H_
