// The sockets of one zmq_group rank and the waits on them (see zmq_links.h).
#include "gpu/comm/zmq_links.h"

#include <algorithm>
#include <cstring>

#include "gpu/comm/connection_guard.h"
#include "gpu/comm/curve_keys.h"
#include "gpu/comm/zap_handler.h"
#include "gpu/core/printable.h"

namespace tandem::gpu::internal {

using zmq_wire::wire_header;
using zmq_wire::wire_kind;

namespace {

std::string ms_text(zmq_clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

constexpr std::size_t max_reason_bytes = 4000;  // abort texts fit the 4096-byte message floor
constexpr std::uint64_t logged_drops_per_reason = 20;
constexpr int max_messages_per_drain = 256;  // then the wait looks at its deadline again

const char* drop_reason_text(std::size_t drop_reason) {
  static const char* const names[] = {"from no peer", "of the wrong number of frames", "whose header does not decode",
                                      "of another group"};
  return names[drop_reason];
}

}  // namespace

zmq_links::zmq_links(int rank, int size, zmq_data_endpoint own, std::vector<std::string> peer_public_keys)
    : rank_(rank),
      size_(size),
      options_(own.options_),
      keys_(own.secure() ? std::move(peer_public_keys) : std::vector<std::string>()),
      note_interval_(std::max(std::chrono::milliseconds(1), own.options_.timeout / 4)),
      context_(std::move(own.context_)),
      zap_(std::move(own.zap_)),
      guard_(std::move(own.guard_)),
      router_(std::move(own.socket_)),
      peers_(static_cast<std::size_t>(size)) {}

zmq_links::~zmq_links() = default;

std::string zmq_links::current() const { return std::string(zmq_wire::to_string(kind_)) + " #" + std::to_string(seq_); }

void zmq_links::begin(wire_kind kind, std::uint64_t seq) {
  kind_ = kind;
  seq_ = seq;
}

wire_header zmq_links::header(std::uint32_t param, dtype type, std::int64_t count, std::uint32_t index,
                              std::size_t payload_bytes) const {
  wire_header h;
  h.kind = kind_;
  h.group_tag = options_.group_tag;
  h.sender = static_cast<std::uint32_t>(rank_);
  h.param = param;
  h.seq = seq_;
  h.index = index;
  h.dtype_code = zmq_wire::dtype_code(type);
  h.count = static_cast<std::uint64_t>(count);
  h.payload_bytes = payload_bytes;
  return h;
}

zmq::message_t zmq_links::make_message(const wire_header& h, const void* payload) {
  zmq::message_t msg(zmq_wire::header_bytes + h.payload_bytes);
  zmq_wire::encode_header(h, msg.data<std::byte>());
  if (payload != nullptr && h.payload_bytes > 0) std::memcpy(zmq_links::payload(msg), payload, h.payload_bytes);
  return msg;
}

void zmq_links::write_header(zmq::message_t& msg, const wire_header& h) { zmq_wire::encode_header(h, msg.data<std::byte>()); }

std::size_t zmq_links::stashed() const {
  std::size_t n = 0;
  for (const auto& p : peers_) n += p.stash.size();
  return n;
}

status zmq_links::join(const std::vector<std::string>& endpoints) {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    peer& p = peers_[static_cast<std::size_t>(r)];
    p.endpoint = endpoints[static_cast<std::size_t>(r)];
    p.dealer = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::dealer);
    p.dealer->set(zmq::sockopt::linger, 0);
    p.dealer->set(zmq::sockopt::sndhwm, options_.queue_messages);
    if (secure()) {  // known by its key; no routing id a stranger could claim first
      p.dealer->set(zmq::sockopt::curve_serverkey, keys_[static_cast<std::size_t>(r)]);
      p.dealer->set(zmq::sockopt::curve_publickey, options_.curve->own.public_key);
      p.dealer->set(zmq::sockopt::curve_secretkey, options_.curve->own.secret_key);
      p.dealer->set(zmq::sockopt::handshake_ivl, static_cast<int>(std::min<std::int64_t>(10'000, options_.timeout.count())));
    } else {
      p.dealer->set(zmq::sockopt::routing_id, zmq_wire::routing_id(static_cast<std::uint32_t>(rank_)));
    }
    try {
      p.dealer->connect(p.endpoint);
    } catch (const zmq::error_t& e) {
      return {status_code::invalid_argument, "cannot connect to rank " + std::to_string(r) + " at '" + p.endpoint + "': " + e.what()};
    }
  }
  begin(wire_kind::hello, 0);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    wire_header h = header(static_cast<std::uint32_t>(size_), dtype::float32, static_cast<std::int64_t>(options_.chunk_bytes), 0, 0);
    h.dtype_code = 0;
    zmq::message_t hello = make_message(h, nullptr);
    if (status s = send(r, hello); !s) return s;
  }
  const auto all_joined = [this] {
    for (int r = 0; r < size_; ++r)
      if (r != rank_ && !peers_[static_cast<std::size_t>(r)].joined) return false;
    return true;
  };
  const auto missing = [this] {
    std::string list;
    int n = 0;
    for (int r = 0; r < size_; ++r) {
      const peer& p = peers_[static_cast<std::size_t>(r)];
      if (r == rank_ || p.joined) continue;
      list += std::string(n++ ? ", " : "") + std::to_string(r) + " (" + p.endpoint + ")";
    }
    return std::string(n == 1 ? "rank " : "ranks ") + list + " did not join within " +
           std::to_string(options_.timeout.count()) + " ms";
  };
  return wait(-1, nullptr, false, all_joined, missing);
}

status zmq_links::send(int peer_rank, zmq::message_t& msg) {
  zmq::socket_t& dealer = *peers_[static_cast<std::size_t>(peer_rank)].dealer;
  return wait(
      peer_rank, &dealer, true, [&] { return dealer.send(msg, zmq::send_flags::dontwait).has_value(); },
      [&] {
        return "could not hand a message to rank " + std::to_string(peer_rank) + " within " +
               std::to_string(options_.timeout.count()) + " ms (its queue stays full)" +
               blame(static_cast<std::uint32_t>(peer_rank));
      });
}

result<zmq::message_t> zmq_links::receive(int from, const wire_header& want) {
  peer& p = peers_[static_cast<std::size_t>(from)];
  status s = wait(
      from, nullptr, true, [&] { return !p.stash.empty(); },
      [&] {
        return "no message from rank " + std::to_string(from) + " within " + std::to_string(options_.timeout.count()) + " ms" +
               blame(static_cast<std::uint32_t>(from));
      });
  if (!s) return s;
  auto [h, msg] = std::move(p.stash.front());
  p.stash.pop_front();
  if (status c = zmq_wire::check_expected(h, want); !c) return c;
  return std::move(msg);
}

template <class Ready, class Timeout>
status zmq_links::wait(int awaited, zmq::socket_t* out, bool bounded, Ready&& ready, Timeout&& on_timeout) {
  const auto start = zmq_clock::now();
  const auto deadline = start + options_.timeout;
  auto next_note = start + note_interval_;
  for (;;) {
    if (status f = peer_failure(); !f) return f;
    if (ready()) return status::ok();
    const auto now = zmq_clock::now();
    if (now >= deadline) return {status_code::io_error, on_timeout()};
    if (awaited >= 0 && now >= next_note) {
      send_notes(static_cast<std::uint32_t>(awaited));
      next_note = now + note_interval_;
    }
    const auto until = awaited >= 0 ? std::min(deadline, next_note) : deadline;
    const auto slice = std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(until - now));
    const bool can_read = !bounded || stashed() < static_cast<std::size_t>(options_.queue_messages);
    zmq_pollitem_t items[2] = {{router_->handle(), 0, static_cast<short>(can_read ? ZMQ_POLLIN : 0), 0},
                               {out != nullptr ? out->handle() : nullptr, 0, ZMQ_POLLOUT, 0}};
    zmq::poll(items, out != nullptr ? 2 : 1, slice);
    if (items[0].revents & ZMQ_POLLIN)
      if (status s = drain(bounded); !s) return s;
  }
}

status zmq_links::drain(bool bounded) {
  for (int n = 0; n < max_messages_per_drain && (!bounded || stashed() < static_cast<std::size_t>(options_.queue_messages)); ++n) {
    std::vector<zmq::message_t> frames(1);
    if (!router_->recv(frames[0], zmq::recv_flags::dontwait)) return status::ok();
    while (frames.back().more()) {  // the rest of a message is there once its first frame is
      frames.emplace_back();
      (void)router_->recv(frames.back(), zmq::recv_flags::none);
    }
    if (status s = on_message(frames); !s) return s;
  }
  return status::ok();
}

status zmq_links::refuse(drop_reason why, const std::string& what) {
  if (secure()) return {status_code::io_error, "refused " + what};
  ++dropped_;
  const auto reason = static_cast<std::size_t>(why);
  const std::uint64_t n = ++drops_[reason];
  if (options_.log && n <= logged_drops_per_reason)
    options_.log(options_.log_name + ": zmq_group rank " + std::to_string(rank_) + " of " + std::to_string(size_) + " (" + current() +
                 "): dropped " + what +
                 (n == logged_drops_per_reason ? std::string(" (later messages ") + drop_reason_text(reason) + " are counted, not logged)" : ""));
  return status::ok();
}

result<std::uint32_t> zmq_links::authenticated_rank(const zmq::message_t& body) const {
  const char* user = zmq_msg_gets(body.handle(), "User-Id");
  if (user == nullptr)
    return status{status_code::io_error, "refused a message without a User-Id: it did not come through a CURVE handshake"};
  const std::string key(user);
  const auto it = std::find(keys_.begin(), keys_.end(), key);
  if (it == keys_.end())
    return status{status_code::io_error, "refused a message from key " + printable(key_fingerprint(key)) +
                                             "..., which this run accepts but which is no rank of this group (one of the "
                                             "run's processes talking to the wrong group?)"};
  const auto r = static_cast<std::uint32_t>(it - keys_.begin());
  if (r == static_cast<std::uint32_t>(rank_))
    return status{status_code::io_error, "refused a message signed with this rank's own key " + key_fingerprint(key) +
                                             "... (another process holds rank " + std::to_string(rank_) + "'s secret key?)"};
  return r;
}

status zmq_links::on_message(std::vector<zmq::message_t>& frames) {
  // frames[0]: the routing id the ROUTER prepends; then what the peer sent (one frame or more).
  std::uint32_t sender = 0;
  std::string from;
  if (secure()) {
    auto who = authenticated_rank(frames.back());
    if (!who) return who.error();
    sender = *who;
    from = "rank " + std::to_string(sender);
  } else {
    const std::string id = frames[0].to_string();
    const auto claimed = zmq_wire::rank_of_routing_id(id);
    if (!claimed || *claimed >= static_cast<std::uint32_t>(size_) || *claimed == static_cast<std::uint32_t>(rank_))
      return refuse(drop_reason::no_peer,
                    "a message from a socket with routing id '" + printable(id, 80) + "', which is no peer of this group");
    sender = *claimed;
    from = "rank " + std::to_string(sender);
  }
  if (frames.size() != 2)
    return refuse(drop_reason::frames,
                  "a message of " + std::to_string(frames.size() - 1) + " frames from " + from + " (expected 1)");
  auto decoded = zmq_wire::decode_header(frames[1].data<std::byte>(), frames[1].size());
  if (!decoded) return refuse(drop_reason::header, "a message from " + from + ": " + decoded.error().message());
  const wire_header& h = *decoded;
  if (h.group_tag != options_.group_tag)
    return refuse(drop_reason::group_tag, zmq_wire::describe(h) + ": group tag " + std::to_string(h.group_tag) +
                                              ", this group's is " + std::to_string(options_.group_tag) +
                                              " (a message from an older group?)");
  if (h.sender != sender)
    return {status_code::io_error, "refused a message claiming sender rank " + std::to_string(h.sender) + " from " + from +
                                       (secure() ? "'s key" : "'s socket")};
  peer& p = peers_[sender];
  p.last_heard = zmq_clock::now();
  if (h.kind == wire_kind::hello) {
    if (p.joined) return {status_code::io_error, from + " said hello twice (two processes with the same rank?)"};
    if (h.param != static_cast<std::uint32_t>(size_))
      return {status_code::invalid_argument, from + " joined a group of " + std::to_string(h.param) + " ranks, this rank one of " +
                                                 std::to_string(size_)};
    if (h.count != options_.chunk_bytes)
      return {status_code::invalid_argument, from + " uses chunk_bytes " + std::to_string(h.count) + ", this rank " +
                                                 std::to_string(options_.chunk_bytes)};
    p.joined = true;
    return status::ok();
  }
  if (!p.joined) return {status_code::io_error, "refused " + zmq_wire::describe(h) + ": it came before that rank's hello"};
  switch (h.kind) {
    case wire_kind::waiting:
      p.note_time = p.last_heard;
      p.waiting_for = h.param;
      p.note_seq = h.seq;
      break;
    case wire_kind::abort:
      if (!aborted_)
        aborted_ = status{status_code::io_error,
                          from + " gave up: " +
                              printable(std::string_view(reinterpret_cast<const char*>(payload(frames[1])), h.payload_bytes))};
      break;
    case wire_kind::bye: p.left_after = h.seq; break;
    default: p.stash.emplace_back(h, std::move(frames[1])); break;
  }
  return status::ok();
}

status zmq_links::peer_failure() const {
  if (aborted_) return *aborted_;
  for (int r = 0; r < size_; ++r) {
    const peer& p = peers_[static_cast<std::size_t>(r)];
    if (p.left_after && *p.left_after < seq_)
      return {status_code::io_error,
              "rank " + std::to_string(r) + " left the group after collective #" + std::to_string(*p.left_after)};
  }
  return status::ok();
}

void zmq_links::send_notes(std::uint32_t awaited) {
  wire_header h = header(awaited, dtype::float32, 0, 0, 0);
  h.kind = wire_kind::waiting;
  h.dtype_code = 0;
  for (auto& p : peers_) {
    if (!p.dealer) continue;
    zmq::message_t note = make_message(h, nullptr);
    (void)p.dealer->send(note, zmq::send_flags::dontwait);  // a full queue drops the note
  }
}

std::string zmq_links::blame(std::uint32_t awaited) const {
  const auto now = zmq_clock::now();
  std::string text;
  std::vector<std::uint32_t> chain{static_cast<std::uint32_t>(rank_)};
  for (std::uint32_t x = awaited;;) {
    if (std::find(chain.begin(), chain.end(), x) != chain.end()) {
      text += "; the waits form a cycle back to rank " + std::to_string(x) + " (did the ranks call different collectives?)";
      return text;
    }
    chain.push_back(x);
    const peer& p = peers_[x];
    const bool noting = p.note_time && now - *p.note_time <= 2 * note_interval_;
    if (!noting) {
      text += "; rank " + std::to_string(x) + " is silent (no message for " + (p.last_heard ? ms_text(now - *p.last_heard) : "ever") +
              "): dead, hung, or not calling " + current();
      return text;
    }
    text += "; rank " + std::to_string(x) + " waits for rank " + std::to_string(p.waiting_for);
    if (p.note_seq != seq_) text += " in collective #" + std::to_string(p.note_seq);
    x = p.waiting_for;
    if (x >= static_cast<std::uint32_t>(size_)) return text;
  }
}

void zmq_links::send_abort(const std::string& reason) {
  const std::string text = reason.substr(0, max_reason_bytes);
  wire_header h = header(0, dtype::float32, 0, 0, text.size());
  h.kind = wire_kind::abort;
  h.dtype_code = 0;
  for (auto& p : peers_) {
    if (!p.dealer) continue;
    zmq::message_t msg = make_message(h, text.data());
    (void)p.dealer->send(msg, zmq::send_flags::dontwait);
  }
}

void zmq_links::send_bye(std::uint64_t last_seq) {
  wire_header h = header(0, dtype::float32, 0, 0, 0);
  h.kind = wire_kind::bye;
  h.seq = last_seq;
  h.dtype_code = 0;
  const int linger_ms = static_cast<int>(std::min<std::int64_t>(200, options_.timeout.count()));
  for (auto& p : peers_) {
    if (!p.dealer) continue;
    zmq::message_t msg = make_message(h, nullptr);
    (void)p.dealer->send(msg, zmq::send_flags::dontwait);
    p.dealer->set(zmq::sockopt::linger, linger_ms);
  }
}

}  // namespace tandem::gpu::internal
