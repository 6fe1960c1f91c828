// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/redis/redis_connection.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

timeval Millis(int32_t ms) { return timeval{.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}; }

}  // namespace

void RedisConnection::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

RedisConnection::RedisConnection(const RedisTierOptions& options)
    : options_(options), backoff_ms_(options.backoff_initial_ms) {}

RedisConnection::~RedisConnection() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

int64_t RedisConnection::NowMs() const {
  if (options_.now_ms) return options_.now_ms();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string RedisConnection::Where() const {
  return absl::StrCat("redis://", options_.endpoint.host, ":", options_.endpoint.port, "/",
                      options_.endpoint.db);
}

void RedisConnection::Report(std::string_view line) const {
  if (options_.report) {
    options_.report(line);
  } else {
    std::cerr << line << "\n";
  }
}

absl::Status RedisConnection::Fail(std::string_view reason) {
  if (ctx_ != nullptr) {
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  next_attempt_ms_ = NowMs() + backoff_ms_;
  backoff_ms_ = std::min<int64_t>(2 * backoff_ms_, options_.backoff_max_ms);
  if (healthy_) {
    healthy_ = false;
    ++incidents_;
    Report(absl::StrCat("pagedkv: remote tier ", Where(), " failed (", std::string(reason),
                        "); lookups miss and stores are dropped until it is back; "
                        "reconnecting with backoff"));
  }
  return absl::UnavailableError(std::string(reason));
}

absl::Status RedisConnection::Connect() {
  if (ctx_ != nullptr) return absl::OkStatus();
  if (NowMs() < next_attempt_ms_) return absl::UnavailableError("backing off");
  ctx_ = redisConnectWithTimeout(options_.endpoint.host.c_str(), options_.endpoint.port,
                                 Millis(options_.connect_timeout_ms));
  if (ctx_ == nullptr) return Fail("cannot allocate a connection");
  if (ctx_->err != 0) return Fail(absl::StrCat("connect: ", ctx_->errstr));
  if (redisSetTimeout(ctx_, Millis(options_.io_timeout_ms)) != REDIS_OK) {
    return Fail("cannot set the I/O timeout");
  }
  return Authenticate();
}

absl::Status RedisConnection::Authenticate() {
  std::vector<Command> setup;
  const RedisEndpoint& e = options_.endpoint;
  if (!e.password.empty()) {
    setup.push_back(e.user.empty() ? Command{"AUTH", e.password}
                                   : Command{"AUTH", e.user, e.password});
  }
  const std::string db = absl::StrCat(e.db);
  if (e.db != 0) setup.push_back({"SELECT", db});
  for (const Command& c : setup) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : c) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (r == nullptr) return Fail(absl::StrCat(std::string(c[0]), ": ", ctx_->errstr));
    if (r->type == REDIS_REPLY_ERROR) return Fail(absl::StrCat(std::string(c[0]), ": ", r->str));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RedisConnection::Reply>> RedisConnection::Pipeline(
    const std::vector<Command>& commands) {
  PAGEDKV_RETURN_IF_ERROR(Connect());
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const Command& c : commands) {
    argv.clear();
    lens.clear();
    for (std::string_view a : c) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      return Fail(absl::StrCat("cannot queue ", std::string(c[0])));
    }
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      return Fail(absl::StrCat(std::string(commands[i][0]), ": ",
                               ctx_->errstr[0] ? ctx_->errstr : "no reply"));
    }
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR)
      return Fail(absl::StrCat(std::string(commands[i][0]), ": ", r->str));
    replies.push_back(std::move(r));
  }
  if (!healthy_) {
    healthy_ = true;
    Report(absl::StrCat("pagedkv: remote tier ", Where(), " is back"));
  }
  backoff_ms_ = options_.backoff_initial_ms;
  return replies;
}

}  // namespace pagedkv
