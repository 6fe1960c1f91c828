// Copyright 2026 The pagedkv Authors.
//
// PipeliningServer (see pipelining_server.h): one buffered stream per connection.
#include "engine/serve/http/pipelining_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

namespace pagedkv::server {
namespace {

// Milliseconds of a cpp-httplib timeout (seconds and microseconds).
int TimeoutMs(time_t sec, time_t usec) { return static_cast<int>(sec * 1000 + usec / 1000); }

// True when `sock` has `events` (or a hang-up or error, which the next call then reports) within
// `timeout_ms`.
bool WaitFor(int sock, short events, int timeout_ms) {
  pollfd p = {.fd = sock, .events = events, .revents = 0};
  int n;
  do {
    n = poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

// The numeric address and port of `addr`; empty and -1 when it has none.
void AddressOf(const sockaddr_storage& addr, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  ip.clear();
  port = -1;
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(serv);
  }
}

// A connection's socket as cpp-httplib's Stream, with a read buffer that outlives each request.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int sock, int read_ms, int write_ms)
      : sock_(sock), read_ms_(read_ms), write_ms_(write_ms) {}

  bool is_readable() const override { return HasBuffered() || WaitFor(sock_, POLLIN, read_ms_); }
  bool is_writable() const override { return WaitFor(sock_, POLLOUT, write_ms_); }

  ssize_t read(char* ptr, size_t size) override {
    if (!HasBuffered()) {
      if (!WaitFor(sock_, POLLIN, read_ms_)) return -1;
      ssize_t n;
      do {
        n = recv(sock_, buffer_, sizeof(buffer_), 0);
      } while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t k = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, k);
    begin_ += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    if (getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) len = 0;
    AddressOf(addr, len, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    if (getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) len = 0;
    AddressOf(addr, len, ip, port);
  }
  socket_t socket() const override { return sock_; }

  // Bytes read from the socket and not handed out yet (the next pipelined request's).
  bool HasBuffered() const { return begin_ < end_; }

 private:
  int sock_;
  int read_ms_;
  int write_ms_;
  char buffer_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace

bool PipeliningServer::process_and_close_socket(socket_t sock) {
  ConnectionStream stream(sock, TimeoutMs(read_timeout_sec_, read_timeout_usec_),
                          TimeoutMs(write_timeout_sec_, write_timeout_usec_));
  bool ok = true;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    // The next request: buffered already (pipelined), or arriving within the keep-alive
    // timeout, looked for in short waits so a stopping server is not held up.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    bool next = stream.HasBuffered();
    while (!next && svr_sock_ != INVALID_SOCKET && std::chrono::steady_clock::now() < deadline) {
      next = WaitFor(sock, POLLIN, 50);
    }
    if (!next || svr_sock_ == INVALID_SOCKET) break;
    bool connection_closed = false;
    ok = process_request(stream, /*close_connection=*/left == 1, connection_closed, nullptr);
    if (!ok || connection_closed) break;
  }
  shutdown(sock, SHUT_RDWR);
  close(sock);
  return ok;
}

}  // namespace pagedkv::server
