// A plain TCP peer of a listening ZeroMQ socket on 127.0.0.1, for the tests of what a socket does
// with strangers: connect, write bytes, watch for the socket closing the connection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace tandem::test {

/// A connected socket to 127.0.0.1:port, or -1.
inline int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Writes what it can of bytes[0, n) (a closed connection stops it early).
inline void send_all(int fd, const void* bytes, std::size_t n) {
  std::size_t sent = 0;
  while (sent < n) {
    const ssize_t k = ::send(fd, static_cast<const char*>(bytes) + sent, n - sent, MSG_NOSIGNAL);
    if (k <= 0) break;
    sent += static_cast<std::size_t>(k);
  }
}

/// Reads (and drops) until the other end closes the connection: true when it did within `limit`.
inline bool closed_within(int fd, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) continue;
    char buf[512];
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

/// A peer speaking ZMTP 1.0: an unversioned greeting (an empty routing id: length 1, flags 0), its
/// side kept open, as an old peer, or a stranger whose first byte is not 0xff, would. True when
/// the socket on `port` closes the connection within `limit`.
inline bool zmtp1_peer_is_closed(int port, std::chrono::milliseconds limit) {
  const int fd = connect_loopback(port);
  if (fd < 0) return false;
  const unsigned char greeting[] = {0x01, 0x00};
  send_all(fd, greeting, sizeof greeting);
  const bool closed = closed_within(fd, limit);
  ::close(fd);
  return closed;
}

}  // namespace tandem::test
