// The control socket's thread: open, poll (socket + eventfd), decode or refuse, send, close.
#include "actors/bridge/socket_thread.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <set>
#include <span>
#include <vector>

#include <caf/error.hpp>
#include <caf/sec.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"
#include "gpu/comm/connection_guard.h"
#include "gpu/comm/zap_handler.h"
#include "gpu/comm/zmtp_versions.h"

namespace tandem {

namespace {

/// Per-peer bookkeeping of the socket thread's log: refused frames, and peers already reported
/// unreachable (reported again once they send something).
class peer_log {
 public:
  explicit peer_log(const socket_options& o) : o_(o) {}

  void refused(const std::string& peer, std::size_t bytes, const std::string& code, const std::string& why) {
    int& n = refusals_[peer];
    ++n;
    if (n <= o_.logged_refusals_per_peer)
      log_line(o_.log_name + ": refused a frame from peer " + describe(peer) + " (" + std::to_string(bytes) + " bytes): " + code +
               ": " + why + "; the frame is dropped");
    if (n == o_.logged_refusals_per_peer)
      log_line(o_.log_name + ": further refused frames from peer " + describe(peer) + " are counted, not logged");
  }
  /// True the first time `peer` is unreachable since it was last heard from.
  bool first_unreachable(const std::string& peer) { return unreachable_.insert(peer).second; }
  void heard(const std::string& peer) { unreachable_.erase(peer); }

  std::string describe(const std::string& peer) const {
    return o_.role == socket_role::member_dealer ? "controller " + o_.endpoint : "'" + peer_text(peer) + "'";
  }

 private:
  const socket_options& o_;
  std::map<std::string, int> refusals_;
  std::set<std::string> unreachable_;
};

std::string zmq_text(const zmq::error_t& e) { return std::string(e.what()) + " (errno " + std::to_string(e.num()) + ")"; }

}  // namespace

std::string peer_text(const std::string& id) {
  bool printable = !id.empty();
  for (unsigned char c : id) printable = printable && c >= 0x21 && c < 0x7f;
  if (printable) return id;
  static const char* hex = "0123456789abcdef";
  std::string out = "0x";
  for (unsigned char c : id) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return id.empty() ? "<empty id>" : out;
}

socket_thread::socket_thread(socket_options options) : options_(std::move(options)) {}

socket_thread::~socket_thread() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

caf::expected<std::string> socket_thread::start(socket_events events) {
  if (thread_.joinable() || wake_fd_ >= 0)
    return tandem_error(tandem_errc::wrong_state, options_.log_name + ": socket thread started twice");
  events_ = std::move(events);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0)
    return caf::make_error(caf::sec::runtime_error, options_.log_name + ": eventfd failed: " + std::strerror(errno));
  std::promise<std::string> opened;
  std::future<std::string> result = opened.get_future();
  thread_ = std::thread([this, &opened] { run(opened); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    started_ = true;
  }
  std::string outcome = result.get();  // "+endpoint" or "-reason"
  if (outcome.starts_with("-")) {
    thread_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;  // post() refuses
    return tandem_error(tandem_errc::invalid_config, outcome.substr(1));
  }
  return outcome.substr(1);
}

bool socket_thread::post(std::string peer, control::frame f) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || !started_) return false;
    queue_.push_back({std::move(peer), std::move(f)});
  }
  wake();
  return true;
}

void socket_thread::stop(std::chrono::milliseconds flush) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) flush_ = flush;
    stopping_ = true;
  }
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  events_ = {};  // drops what the callbacks hold (the bridge's handle)
}

void socket_thread::wake() {
  const std::uint64_t one = 1;
  // EAGAIN only when the counter is about to overflow: the thread is awake anyway.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void socket_thread::run(std::promise<std::string>& opened) {
  const bool router = options_.role == socket_role::controller_router;
  const std::string what = router ? "bind the controller's ROUTER socket to '" : "connect to the controller at '";
  std::optional<zmq::context_t> context;
  std::optional<zmq::socket_t> socket;
  std::unique_ptr<gpu::zap_handler> zap;      // before the socket binds; closed after it
  std::unique_ptr<gpu::connection_guard> guard;
  const auto& security = options_.security;
  try {
    context.emplace(1);
    socket.emplace(*context, router ? zmq::socket_type::router : zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(options_.max_frame_bytes));
    socket->set(zmq::sockopt::handshake_ivl, 10000);
    if (router && security) {
      auto started = gpu::zap_handler::start(*context, options_.log_name, log_line);
      if (!started) {
        opened.set_value("-" + started.error().message());
        return;
      }
      zap = std::move(started.value());
      for (std::size_t r = 0; r < security->member_public_keys.size(); ++r)
        zap->allow("tandem-control", security->member_public_keys[r], "w" + std::to_string(r));
      socket->set(zmq::sockopt::curve_server, 1);
      socket->set(zmq::sockopt::curve_secretkey, security->own.secret_key);
      socket->set(zmq::sockopt::zap_domain, "tandem-control");
    } else if (router) {
      gpu::refuse_pre_zmtp3_peers(*socket);
    } else if (security) {
      socket->set(zmq::sockopt::curve_serverkey, security->controller_public_key);
      socket->set(zmq::sockopt::curve_publickey, security->own.public_key);
      socket->set(zmq::sockopt::curve_secretkey, security->own.secret_key);
    }
    gpu::connection_guard_options g;
    g.log_name = options_.log_name;
    g.socket_name = router ? "the control socket" : "the controller at " + options_.endpoint;
    g.expected_peers = options_.expected_peers;
    g.client = !router;
    g.log = log_line;
    auto attached = gpu::connection_guard::attach(*context, *socket, g);
    if (!attached) {
      opened.set_value("-" + attached.error().message());
      return;
    }
    guard = std::move(attached.value());
    if (router) {
      socket->set(zmq::sockopt::router_mandatory, true);
      socket->bind(options_.endpoint);
      guard->rename("the control socket " + socket->get(zmq::sockopt::last_endpoint));
    } else {
      socket->set(zmq::sockopt::routing_id, zmq::buffer(options_.routing_id));
      socket->connect(options_.endpoint);
    }
  } catch (const zmq::error_t& e) {
    opened.set_value("-cannot " + what + options_.endpoint + "': " + zmq_text(e));
    if (socket) socket->close();
    guard.reset();
    zap.reset();
    return;
  }
  opened.set_value("+" + (router ? socket->get(zmq::sockopt::last_endpoint) : options_.endpoint));

  peer_log log(options_);
  const std::size_t parts_expected = router ? 2 : 1;
  auto receive_all = [&] {
    for (int batch = 0; batch < 256; ++batch) {  // then serve the outgoing queue
      std::vector<zmq::message_t> parts;
      try {
        if (!zmq::recv_multipart(*socket, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        log_line(options_.log_name + ": receiving failed: " + zmq_text(e));
        return;
      }
      const std::string peer = router && !parts.empty() ? parts[0].to_string() : std::string();
      log.heard(peer);
      if (parts.size() != parts_expected) {
        const std::size_t first = router ? 1 : 0;  // the routing id is ZeroMQ's, not the peer's
        std::size_t bytes = 0;
        for (std::size_t i = first; i < parts.size(); ++i) bytes += parts[i].size();
        refused_.fetch_add(1);
        log.refused(peer, bytes, "framing",
                    "expected one message frame" + std::string(router ? " after the routing id" : "") + ", got " +
                        std::to_string(parts.size() - first));
        continue;
      }
      const zmq::message_t& body = parts.back();
      if (router && security) {
        // The routing id is the peer's claim; the User-Id is what its key proved (ZAP).
        const char* proven = nullptr;
        try {
          proven = const_cast<zmq::message_t&>(body).gets("User-Id");  // gets() is not const in cppzmq
        } catch (const zmq::error_t&) {
        }
        if (proven == nullptr || peer != proven) {
          refused_.fetch_add(1);
          log.refused(peer, body.size(), "identity",
                      "its key proved it is '" + std::string(proven ? proven : "nobody") +
                          "', but it uses another's routing id");
          continue;
        }
      }
      auto decoded = control::decode(std::span<const std::byte>(body.data<std::byte>(), body.size()), options_.max_frame_bytes);
      if (!decoded) {
        refused_.fetch_add(1);
        log.refused(peer, body.size(), std::string(control::to_string(decoded.error().code)), decoded.error().text);
        continue;
      }
      if (std::holds_alternative<control::heartbeat>(decoded.value()))
        heartbeat_bytes_.fetch_add(body.size());
      else
        received_bytes_.fetch_add(body.size());
      if (events_.on_message) events_.on_message(peer, std::move(decoded).value());
    }
  };
  auto unreachable = [&](const std::string& peer, const std::string& reason) {
    if (log.first_unreachable(peer))
      log_line(options_.log_name + ": cannot send to peer " + log.describe(peer) + ": " + reason +
               "; frames to it are dropped until it is heard from again");
    if (events_.on_unreachable) events_.on_unreachable(peer, reason);
  };
  auto send_all = [&](std::deque<outgoing>& pending) {
    for (auto& out : pending) {
      zmq::message_t body(out.bytes.data(), out.bytes.size());
      const bool heartbeat = out.bytes.size() >= control::header_bytes &&
                             std::to_integer<int>(out.bytes[6]) == static_cast<int>(control::message_kind::heartbeat) &&
                             std::to_integer<int>(out.bytes[7]) == 0;
      (heartbeat ? heartbeat_bytes_ : sent_bytes_).fetch_add(out.bytes.size());
      try {
        if (router) {
          if (!socket->send(zmq::buffer(out.peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
            unreachable(out.peer, "its queue is full (it is not reading)");
            continue;
          }
          (void)socket->send(body, zmq::send_flags::dontwait);  // the rest of an accepted message always goes
        } else if (!socket->send(body, zmq::send_flags::dontwait)) {
          unreachable(out.peer, "the queue to the controller is full (it is not reading)");
        }
      } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH)
          unreachable(out.peer, "no connected peer has this routing id");
        else
          log_line(options_.log_name + ": sending to peer " + log.describe(out.peer) + " failed: " + zmq_text(e));
      }
    }
    pending.clear();
  };

  zmq_pollitem_t items[2] = {{socket->handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  std::deque<outgoing> pending;
  std::chrono::milliseconds flush{0};
  for (bool stopping = false; !stopping;) {
    if (zmq_poll(items, 2, -1) < 0) {
      if (zmq_errno() == EINTR) continue;  // a stop/continue signal may interrupt the poll
      log_line(options_.log_name + ": polling the control socket failed: " + zmq_strerror(zmq_errno()));
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;  // post() refuses from now on
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    if (items[0].revents & ZMQ_POLLIN) receive_all();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending.swap(queue_);
      stopping = stopping_;
      flush = flush_;
    }
    send_all(pending);
  }
  socket->set(zmq::sockopt::linger, static_cast<int>(flush.count()));
  socket->close();
  guard.reset();  // its monitor socket and the ZAP socket are in the context too
  zap.reset();
  context->close();  // waits for the last frames up to the linger time
}

}  // namespace tandem
