// The connection guard (connection_guard.h): a socket monitor's events, the cap, the log lines.
#include "gpu/comm/connection_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <zmq.hpp>

namespace tandem::gpu {

/// The monitor's PAIR socket, kept out of the header.
class monitor_socket {
 public:
  explicit monitor_socket(zmq::context_t& c) : socket(c, zmq::socket_type::pair) {}
  zmq::socket_t socket;
};

namespace {

std::atomic<std::uint64_t> monitor_counter{0};
constexpr int logged_lines_per_host = 20;

/// "10.0.0.7:41234" for a connected TCP descriptor, "a local peer" otherwise.
std::string peer_address(int fd) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return "a peer gone at once";
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  return "a local peer";
}

std::string protocol_error_text(std::uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "the peer does not speak CurveZMQ, or speaks it where this socket does not (ZMTP mechanism mismatch)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: return "a CURVE message failed its cryptographic check";
    case ZMQ_PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE: return "the CURVE key exchange failed";
    case ZMQ_PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND: return "an unexpected ZMTP command";
    case ZMQ_PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE: return "an invalid ZMTP command sequence";
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED:
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE: return "a malformed ZMTP command";
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO: return "a malformed CURVE HELLO";
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE: return "a malformed CURVE INITIATE";
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_ERROR: return "a malformed ZMTP ERROR";
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_READY: return "a malformed ZMTP READY";
    case ZMQ_PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_WELCOME: return "a malformed CURVE WELCOME";
    case ZMQ_PROTOCOL_ERROR_ZMTP_INVALID_METADATA: return "invalid ZMTP metadata";
    default: break;
  }
  if ((code & 0xff000000u) == 0x20000000u) return "the ZAP handler's reply was unusable";
  return "a ZMTP protocol error (code 0x" + [&] {
    char b[16];
    std::snprintf(b, sizeof b, "%x", code);
    return std::string(b);
  }() + ")";
}

}  // namespace

result<std::unique_ptr<connection_guard>> connection_guard::attach(zmq::context_t& context, zmq::socket_t& server,
                                                                   connection_guard_options options) {
  std::unique_ptr<connection_guard> g(new connection_guard());
  g->options_ = std::move(options);
  const std::string endpoint = "inproc://tandem-monitor-" + std::to_string(::getpid()) + "-" + std::to_string(++monitor_counter);
  const int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
  if (zmq_socket_monitor(server.handle(), endpoint.c_str(), events) != 0)
    return status{status_code::io_error, g->options_.log_name + ": cannot monitor " + g->options_.socket_name + ": " +
                                             zmq_strerror(zmq_errno())};
  try {
    g->monitor_ = std::make_unique<monitor_socket>(context);
    g->monitor_->socket.set(zmq::sockopt::linger, 0);
    g->monitor_->socket.connect(endpoint);  // before the bind: no event is lost
  } catch (const zmq::error_t& e) {
    return status{status_code::io_error, g->options_.log_name + ": cannot monitor " + g->options_.socket_name + ": " + e.what()};
  }
  g->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g->wake_fd_ < 0) return status{status_code::io_error, g->options_.log_name + ": eventfd for the connection guard failed"};
  connection_guard* raw = g.get();
  g->thread_ = std::thread([raw] { raw->run(); });
  return g;
}

connection_guard::~connection_guard() {
  stopping_ = true;
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  monitor_.reset();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void connection_guard::rename(std::string socket_name) {
  std::lock_guard<std::mutex> lock(name_mutex_);
  options_.socket_name = std::move(socket_name);
}

void connection_guard::run() {
  zmq::socket_t& s = monitor_->socket;
  enum class stage { waiting, authenticated, refused };
  struct connection {
    std::string address;
    stage now = stage::waiting;
    std::chrono::steady_clock::time_point since;
  };
  std::map<int, connection> open;
  std::string pending_failure;    // the reason of the last failed handshake, until its connection closes
  std::size_t unplaced_successes = 0;  // handshakes that succeeded while several connections waited
  std::map<std::string, int> lines_by_host;
  const auto log = [&](const std::string& address, const std::string& line) {
    if (!options_.log) return;
    const std::string host = address.substr(0, address.rfind(':'));
    int& n = lines_by_host[host];
    ++n;
    if (n <= logged_lines_per_host)
      options_.log(options_.log_name + ": " + line +
                   (n == logged_lines_per_host ? " (later refusals of " + host + " are counted, not logged)" : ""));
  };
  const auto name = [&] {
    std::lock_guard<std::mutex> lock(name_mutex_);
    return options_.socket_name;
  };
  const std::size_t cap = static_cast<std::size_t>(std::max(0, options_.expected_peers) + std::max(0, options_.max_waiting));
  zmq_pollitem_t items[2] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  while (!stopping_) {
    if (zmq_poll(items, 2, -1) < 0) {
      if (zmq_errno() == EINTR) continue;
      return;
    }
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    zmq::message_t head, address;
    try {
      if (!s.recv(head, zmq::recv_flags::dontwait)) continue;
      if (head.more()) (void)s.recv(address, zmq::recv_flags::none);
    } catch (const zmq::error_t&) {
      return;
    }
    if (head.size() < 6) continue;
    std::uint16_t event = 0;
    std::uint32_t value = 0;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, 4);
    const int fd = static_cast<int>(value);
    switch (event) {
      case ZMQ_EVENT_ACCEPTED: {
        connection& c = open[fd];
        c = connection{peer_address(fd), stage::waiting, std::chrono::steady_clock::now()};
        if (open.size() > cap) {
          c.now = stage::refused;
          ++refused_;
          ::shutdown(fd, SHUT_RDWR);  // ZeroMQ sees the end of the stream and closes it
          log(c.address, "refused a connection from " + c.address + " to " + name() + ": " + std::to_string(open.size() - 1) +
                             " connections are open (room for " + std::to_string(options_.expected_peers) +
                             " of the run's peers and " + std::to_string(options_.max_waiting) + " more in the handshake)");
        }
        break;
      }
      case ZMQ_EVENT_CONNECTED:
        open[fd] = connection{peer_address(fd), stage::waiting, std::chrono::steady_clock::now()};
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        ++failed_;
        pending_failure = protocol_error_text(value);
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        ++failed_;
        pending_failure = options_.client ? "it refused this process's key (status " + std::to_string(value) + ")"
                                          : "its key is not one of this run's (ZAP status " + std::to_string(value) + ")";
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        ++failed_;
        pending_failure = std::string("the handshake failed: ") + std::strerror(static_cast<int>(value));
        break;
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: {
        // The event names no connection: placed when exactly one is waiting, else counted.
        pending_failure.clear();
        connection* only = nullptr;
        int waiting = 0;
        for (auto& [d, c] : open)
          if (c.now == stage::waiting) ++waiting, only = &c;
        if (waiting == 1 && unplaced_successes == 0) only->now = stage::authenticated;
        else ++unplaced_successes;
        break;
      }
      case ZMQ_EVENT_DISCONNECTED: {
        const auto it = open.find(fd);
        if (it == open.end()) break;
        const connection c = it->second;
        open.erase(it);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - c.since).count();
        if (options_.client) {
          if (c.now == stage::waiting && !pending_failure.empty())
            log(c.address, "the handshake with " + name() + " (" + c.address + ") failed: " + pending_failure);
        } else if (c.now == stage::waiting && !pending_failure.empty()) {
          log(c.address, "refused the connection from " + c.address + " to " + name() + ": " + pending_failure);
        } else if (c.now == stage::waiting && unplaced_successes == 0) {
          log(c.address, "closed the connection from " + c.address + " to " + name() + " after " + std::to_string(ms) +
                             " ms, before its handshake completed: it sent no valid ZMTP greeting, an oversized or "
                             "malformed frame, or gave up");
        } else if (c.now == stage::waiting) {
          --unplaced_successes;  // it may have been one of them
        }
        pending_failure.clear();
        break;
      }
      default: break;
    }
  }
}

}  // namespace tandem::gpu
