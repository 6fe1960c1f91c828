// Copyright 2026 The pagedkv Authors.
//
// A real redis-server for tests: started on a free loopback port with persistence off
// (--save '' --appendonly no), ready once it prints "Ready to accept connections" (no sleeps),
// killed and reaped by Stop() or the destructor. Restart() starts a new one on the same port.
//
// Example:
//   auto redis = pagedkv::testing::RedisServer::Start();
//   if (!redis) GTEST_SKIP() << pagedkv::testing::kNoRedisMessage;
//   std::string url = redis->Url();   // "redis://127.0.0.1:<port>"
#ifndef PAGEDKV_TESTS_REDIS_SERVER_H_
#define PAGEDKV_TESTS_REDIS_SERVER_H_

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace pagedkv::testing {

inline constexpr const char* kNoRedisMessage =
    "redis-server not found or did not start (apt-get install redis-server); skipping";

class RedisServer {
 public:
  // Null when redis-server is missing or does not become ready within 10 s. `extra` arguments
  // (e.g. {"--requirepass", "pw"}) are appended.
  static std::unique_ptr<RedisServer> Start(std::vector<std::string> extra = {}) {
    auto s = std::unique_ptr<RedisServer>(new RedisServer(FreePort(), std::move(extra)));
    if (s->port_ <= 0 || !s->Launch()) return nullptr;
    return s;
  }
  ~RedisServer() { Stop(); }

  int port() const { return port_; }
  std::string Url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // SIGKILL (no goodbye to clients) and reap.
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (log_fd_ >= 0) close(log_fd_);
    log_fd_ = -1;
  }
  // A fresh, empty server on the same port. False when it did not start.
  bool Restart() {
    Stop();
    return Launch();
  }

 private:
  RedisServer(int port, std::vector<std::string> extra) : port_(port), extra_(std::move(extra)) {}

  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    int port = -1;
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    close(fd);
    return port;
  }

  bool Launch() {
    int out[2];
    if (pipe(out) != 0) return false;
    std::vector<std::string> args = {
        "redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",        "--save", "",
        "--appendonly", "no",     "--daemonize",         "no",     "--protected-mode", "no"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    close(out[1]);
    // The read end stays open while the server runs (a closed pipe would kill it on its next
    // log line); its few later lines fit the pipe's buffer.
    log_fd_ = out[0];
    const bool ready = WaitReady(out[0]);
    if (!ready) Stop();
    return ready;
  }

  // Reads the server's log until it says it is ready (or 10 s pass, or it exits).
  static bool WaitReady(int fd) {
    std::string log;
    char buf[4096];
    while (log.find("Ready to accept connections") == std::string::npos) {
      pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
      if (poll(&p, 1, 10000) <= 0) return false;
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return false;
      log.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  int port_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
  int log_fd_ = -1;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_REDIS_SERVER_H_
