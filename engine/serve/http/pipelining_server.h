// Copyright 2026 The pagedkv Authors.
//
// PipeliningServer: cpp-httplib's Server with a connection loop that keeps one read buffer for
// the connection's whole life. cpp-httplib 0.11 (Debian 12's) reads each request of a keep-alive
// connection through a stream of its own, so the bytes it read past one request - the start of
// the next, pipelined request - are dropped with that stream, and a client that pipelines two
// requests gets one answer. Here every request a connection sends is answered, in order, as
// HTTP/1.1 requires (RFC 9112, section 9.3.2), by cpp-httplib's own request processing, with its
// read, write and keep-alive timeouts and its keep-alive request limit. Requests are still
// processed one at a time per connection.
//
// Example (http_server.cc):
//   std::unique_ptr<httplib::Server> http = std::make_unique<PipeliningServer>();
//   http->Get("/health", ...);
//   http->listen_after_bind();
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_PIPELINING_SERVER_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_PIPELINING_SERVER_H_

#include "httplib.h"

namespace pagedkv::server {

class PipeliningServer final : public httplib::Server {
 private:
  // Answers the requests of one accepted connection, then closes it.
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_PIPELINING_SERVER_H_
