// The ZAP handler (zap_handler.h): a REP socket on inproc://zeromq.zap.01 and its thread.
#include "gpu/comm/zap_handler.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>
#include <zmq.hpp>

#include "gpu/comm/curve_keys.h"
#include "gpu/core/printable.h"

namespace tandem::gpu {

/// The REP socket, kept out of the header (it includes no ZeroMQ).
class zap_socket {
 public:
  explicit zap_socket(zmq::context_t& c) : socket(c, zmq::socket_type::rep) {}
  zmq::socket_t socket;
};

namespace {
constexpr int logged_refusals_per_address = 20;
}

result<std::unique_ptr<zap_handler>> zap_handler::start(zmq::context_t& context, std::string log_name, log_fn log) {
  std::unique_ptr<zap_handler> h(new zap_handler());
  h->log_name_ = std::move(log_name);
  h->log_ = std::move(log);
  try {
    h->socket_ = std::make_unique<zap_socket>(context);
    h->socket_->socket.set(zmq::sockopt::linger, 0);
    h->socket_->socket.bind("inproc://zeromq.zap.01");
  } catch (const zmq::error_t& e) {
    return status{status_code::invalid_argument,
                  h->log_name_ + ": cannot start the ZAP handler (inproc://zeromq.zap.01): " + e.what()};
  }
  h->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (h->wake_fd_ < 0) return status{status_code::io_error, h->log_name_ + ": eventfd for the ZAP handler failed"};
  zap_handler* raw = h.get();
  h->thread_ = std::thread([raw] { raw->run(); });  // the socket moves to this thread (a full barrier)
  return h;
}

zap_handler::~zap_handler() {
  stopping_ = true;
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  socket_.reset();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void zap_handler::allow(const std::string& domain, const std::string& public_z85, const std::string& user_id) {
  const std::string key = is_curve_key(public_z85) ? curve_key_bytes(public_z85) : std::string();
  if (key.empty()) return;  // not a key: nothing can match it
  std::lock_guard<std::mutex> lock(mutex_);
  allowed_[{domain, key}] = user_id;
}

void zap_handler::run() {
  zmq::socket_t& s = socket_->socket;
  zmq_pollitem_t items[2] = {{s.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  while (!stopping_) {
    if (zmq_poll(items, 2, -1) < 0) {
      if (zmq_errno() == EINTR) continue;
      return;  // the context is terminating
    }
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> request;
    try {
      zmq::message_t part;
      if (!s.recv(part, zmq::recv_flags::dontwait)) continue;
      for (bool more = part.more();; more = part.more()) {
        request.push_back(std::move(part));
        if (!more) break;
        part = zmq::message_t();
        (void)s.recv(part, zmq::recv_flags::none);  // the rest of a message is there once its first part is
      }
    } catch (const zmq::error_t&) {
      return;
    }
    // version, request id, domain, address, identity, mechanism, credentials...
    const auto frame = [&](std::size_t i) { return i < request.size() ? request[i].to_string() : std::string(); };
    const std::string request_id = frame(1), domain = frame(2), address = frame(3), mechanism = frame(5);
    std::string code = "400", text, user;
    if (frame(0) != "1.0") {
      text = "ZAP version '" + printable(frame(0)) + "' is not 1.0";
    } else if (mechanism != "CURVE" || request.size() < 7 || request[6].size() != 32) {
      text = "the " + printable(mechanism) + " mechanism is not accepted: this socket speaks CurveZMQ only";
    } else {
      const std::string key = request[6].to_string();
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = allowed_.find({domain, key}); it != allowed_.end()) {
        code = "200";
        text = "OK";
        user = it->second;
      } else {
        text = "client key " + key_fingerprint(curve_key_text(key)) + "... is not one of this run's";
      }
    }
    if (code == "200") {
      ++accepted_;
    } else {
      ++refused_;
      int& n = refusals_by_address_[address];
      ++n;
      if (log_ && n <= logged_refusals_per_address)
        log_(log_name_ + ": refused a handshake from " + printable(address) + " on " + printable(domain) + ": " + text +
             (n == logged_refusals_per_address ? " (later refusals from this address are counted, not logged)" : ""));
    }
    try {
      const std::vector<std::string> reply = {"1.0", request_id, code, text, user, ""};
      for (std::size_t i = 0; i < reply.size(); ++i)
        s.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    } catch (const zmq::error_t&) {
      return;
    }
  }
}

}  // namespace tandem::gpu
