// Copyright 2026 The pagedkv Authors.
#include "engine/serve/http/http_server.h"

#include <memory>

#include "absl/status/statusor.h"
#include "engine/serve/http/server_metrics.h"
#include "gtest/gtest.h"

namespace pagedkv::server {
namespace {

// A server stopped right after Start (serve whose model or options fail to load) returns: its
// listener may not have begun listening yet, and httplib's stop() alone would then leave it
// accepting forever (the process hung, deaf to SIGTERM). Many rounds, to meet the race.
TEST(HttpServerTest, AServerStoppedRightAfterStartReturns) {
  ServerMetrics metrics;
  for (int round = 0; round < 200; ++round) {
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start({.port = 0, .http_threads = 2}, &metrics);
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_GT((*server)->port(), 0);
    (*server)->Stop();
  }
}

}  // namespace
}  // namespace pagedkv::server
