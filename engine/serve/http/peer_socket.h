// Copyright 2026 The pagedkv Authors.
//
// The client's connection behind an HTTP request, to tell when the client has gone away while
// its request still runs (cpp-httplib hands a handler the peer's addresses, not its socket).
// FindPeerSocket looks through this process's open sockets for the one connected from
// remote_addr:remote_port to local_port; PeerHasClosed asks it, without blocking, whether the
// peer has closed (or reset) the connection. The socket stays valid while the handler runs: the
// server closes a connection only after its handler returns.
//
// Example:
//   const int fd = FindPeerSocket(req.local_port, req.remote_addr, req.remote_port);
//   while (running) { if (fd >= 0 && PeerHasClosed(fd)) Abort(); ... }
//
// Thread-safe: no state.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_PEER_SOCKET_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_PEER_SOCKET_H_

#include "absl/strings/string_view.h"

namespace pagedkv::server {

// The socket connected from remote_addr:remote_port (numeric host, as getnameinfo writes it) to
// local_port; -1 when there is none (e.g. /proc is not mounted).
int FindPeerSocket(int local_port, absl::string_view remote_addr, int remote_port);

// True when the peer of `fd` has closed its side, reset the connection, or `fd` is in error.
// Bytes the peer sent (a pipelined request) are left unread.
bool PeerHasClosed(int fd);

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_PEER_SOCKET_H_
