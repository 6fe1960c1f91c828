// Copyright 2026 The pagedkv Authors.
//
// FindPeerSocket / PeerHasClosed (see peer_socket.h), over /proc/self/fd and poll(2).
#include "engine/serve/http/peer_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

#include "absl/strings/string_view.h"

namespace pagedkv::server {
namespace {

// The numeric host and port of a socket address; false when it is not an IP address.
bool HostAndPort(const sockaddr_storage& addr, socklen_t len, char (&host)[NI_MAXHOST], int* port) {
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *port = std::atoi(serv);
  return true;
}

bool Matches(int fd, int local_port, absl::string_view remote_addr, int remote_port) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr;
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST];
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      !HostAndPort(addr, len, host, &port) || port != local_port) {
    return false;
  }
  len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      !HostAndPort(addr, len, host, &port)) {
    return false;
  }
  return port == remote_port && remote_addr == host;
}

}  // namespace

int FindPeerSocket(int local_port, absl::string_view remote_addr, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dirfd(dir)) continue;
    if (Matches(fd, local_port, remote_addr, remote_port)) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

bool PeerHasClosed(int fd) {
  pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP, .revents = 0};
  if (poll(&p, 1, 0) < 0) return false;  // EINTR: ask again next time
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return true;
  if ((p.revents & POLLIN) == 0) return false;
  char byte;
  return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace pagedkv::server
