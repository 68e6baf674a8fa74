// The ZeroMQ communicator: binding, joining, and the four collectives as ring schedules over
// zmq_links (algorithms and reduction order documented in zmq_group.h).
#include "gpu/comm/zmq_group.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>

#include "gpu/comm/connection_guard.h"
#include "gpu/comm/zap_handler.h"
#include "gpu/comm/zmtp_versions.h"
#include "gpu/comm/zmq_links.h"
#include "gpu/comm/zmq_reduce.h"

namespace tandem::gpu {

using internal::zmq_links;
using zmq_wire::wire_header;
using zmq_wire::wire_kind;

namespace {

/// Elements per message for elements of `elem_bytes` bytes (at least one).
std::int64_t chunk_elems(std::size_t chunk_bytes, std::size_t elem_bytes) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(chunk_bytes / elem_bytes));
}

/// Messages for `n` elements (at least one, so every step carries a header that is checked).
std::int64_t chunks_for(std::int64_t n, std::int64_t per_chunk) { return std::max<std::int64_t>(1, (n + per_chunk - 1) / per_chunk); }

/// Chunk `c` of a run of `len` elements: elements [begin, begin + n), possibly empty.
struct piece {
  std::int64_t begin;
  std::int64_t n;
};
piece chunk_of(std::int64_t len, std::int64_t per_chunk, std::int64_t c) {
  const std::int64_t b = std::min(len, c * per_chunk);
  return {b, std::min(len, b + per_chunk) - b};
}

int ring(int r, int size) { return ((r % size) + size) % size; }

/// One ring collective as this rank sees it: its neighbours, the header of each message it sends
/// (head) and of each it expects from its left neighbour (want), numbered by message index.
struct ring_wire {
  const zmq_links& links;
  int right, left;
  std::uint32_t param;
  dtype type;
  std::int64_t count;

  ring_wire(const zmq_links& l, int rank, int size, std::uint32_t p, dtype t, std::int64_t n)
      : links(l), right(ring(rank + 1, size)), left(ring(rank - 1, size)), param(p), type(t), count(n) {}
  wire_header head(std::int64_t index, std::size_t bytes) const {
    return links.header(param, type, count, static_cast<std::uint32_t>(index), bytes);
  }
  wire_header want(std::int64_t index, std::size_t bytes) const {
    wire_header h = head(index, bytes);
    h.sender = static_cast<std::uint32_t>(left);
    return h;
  }
};

std::byte* bytes_at(void* p, std::int64_t elems, std::size_t elem_bytes) {
  return static_cast<std::byte*>(p) + static_cast<std::size_t>(elems) * elem_bytes;
}
const std::byte* bytes_at(const void* p, std::int64_t elems, std::size_t elem_bytes) {
  return static_cast<const std::byte*>(p) + static_cast<std::size_t>(elems) * elem_bytes;
}

void copy_bytes(void* to, const void* from, std::size_t n) {
  if (n > 0 && to != from) std::memmove(to, from, n);
}

/// Refuses a call whose messages per link would overflow the header's 32-bit index.
status check_messages(std::int64_t messages) {
  if (messages <= std::numeric_limits<std::uint32_t>::max()) return status::ok();
  return {status_code::invalid_argument,
          "the call needs " + std::to_string(messages) + " messages per link, more than a header can number: raise chunk_bytes"};
}

status check_count(std::int64_t count, const void* a, const void* b = reinterpret_cast<const void*>(1)) {
  if (count < 0) return {status_code::invalid_argument, "negative element count " + std::to_string(count)};
  if (count > 0 && (a == nullptr || b == nullptr)) return {status_code::invalid_argument, "null buffer for " + std::to_string(count) + " elements"};
  return status::ok();
}

/// Bytes are moved, never reduced: refused before the collective starts, so the group stays
/// ready (every rank making the same call refuses it the same way).
status refuse_reduction(dtype type, int rank, int size, wire_kind kind) {
  if (type != dtype::uint8) return status::ok();
  return {status_code::invalid_argument, "zmq_group rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " +
                                             zmq_wire::to_string(kind) + " refused: " + std::string(to_string(type)) +
                                             " elements are opaque bytes and cannot be reduced (broadcast and "
                                             "all_gather move them)"};
}

status check_options(const zmq_group_options& o) {
  if (o.chunk_bytes < 1 || o.chunk_bytes > (std::size_t{1} << 30))
    return {status_code::invalid_argument, "zmq_group_options.chunk_bytes must be in [1, 2^30], got " + std::to_string(o.chunk_bytes)};
  if (o.timeout < std::chrono::milliseconds(1))
    return {status_code::invalid_argument, "zmq_group_options.timeout must be at least 1 ms, got " + std::to_string(o.timeout.count()) + " ms"};
  if (o.queue_messages < 1)
    return {status_code::invalid_argument, "zmq_group_options.queue_messages must be at least 1, got " + std::to_string(o.queue_messages)};
  return status::ok();
}

/// Bytes CurveZMQ adds to each message on the wire, which ZMQ_MAXMSGSIZE counts: the MESSAGE
/// command name (8), its nonce (8), the box's MAC (16) and the flags byte inside it (1).
constexpr std::int64_t curve_message_overhead = 33;

/// The CURVE settings of an endpoint, checked before anything is made: a ZAP handler serves a
/// whole context and inproc:// has no handshake, so a secure endpoint needs tcp:// or ipc://
/// and a context of its own.
status check_curve(const zmq_group_curve& c, const std::string& address, bool caller_context) {
  if (caller_context)
    return {status_code::invalid_argument, "a CURVE endpoint makes its own ZeroMQ context (its ZAP handler decides for "
                                           "every socket of the context): pass no context"};
  if (address.rfind("inproc://", 0) == 0)
    return {status_code::invalid_argument, "CURVE needs a tcp:// or ipc:// address: inproc:// connections skip the "
                                           "handshake, so nothing would be authenticated ('" + address + "')"};
  if (!zmq_has("curve"))
    return {status_code::unsupported, "this libzmq was built without CURVE (libsodium): no CurveZMQ endpoint"};
  if (!is_curve_key(c.own.public_key) || !is_curve_key(c.own.secret_key))
    return {status_code::invalid_argument, "curve.own must hold two 40-character Z85 keys (got " +
                                               std::to_string(c.own.public_key.size()) + " and " +
                                               std::to_string(c.own.secret_key.size()) + " characters)"};
  if (auto pub = curve_public_key(c.own.secret_key); !pub || *pub != c.own.public_key)
    return {status_code::invalid_argument, "curve.own.public_key " + key_fingerprint(c.own.public_key) +
                                               "... is not the public key of curve.own.secret_key"};
  for (std::size_t i = 0; i < c.accepted_public_keys.size(); ++i)
    if (!is_curve_key(c.accepted_public_keys[i]))
      return {status_code::invalid_argument, "curve.accepted_public_keys[" + std::to_string(i) +
                                                 "] is not a 40-character Z85 key (" +
                                                 std::to_string(c.accepted_public_keys[i].size()) + " characters)"};
  return status::ok();
}

/// The ZAP domain of a group's endpoints: "tandem-data-" and the tag as 16 hex digits.
std::string zap_domain(std::uint64_t group_tag) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(group_tag));
  return std::string("tandem-data-") + hex;
}

/// The keys create() needs: none for an insecure endpoint; for a secure one, one Z85 key per
/// rank, this rank's own at `rank`, every other one accepted by the endpoint and no two alike
/// (a message's User-Id names one rank).
status check_peer_keys(const zmq_group_options& o, int rank, int size, const std::vector<std::string>& keys) {
  if (!o.curve) {
    if (keys.empty()) return status::ok();
    return {status_code::invalid_argument, std::to_string(keys.size()) +
                                               " peer public keys given for a data endpoint without CURVE (bind it with "
                                               "options.curve, or pass no keys)"};
  }
  if (keys.size() != static_cast<std::size_t>(size))
    return {status_code::invalid_argument, std::to_string(keys.size()) +
                                               " peer public keys given for a CURVE data endpoint, one per rank expected"};
  const auto& accepted = o.curve->accepted_public_keys;
  for (int r = 0; r < size; ++r) {
    const std::string& k = keys[static_cast<std::size_t>(r)];
    const std::string which = "peer_public_keys[" + std::to_string(r) + "]";
    if (!is_curve_key(k))
      return {status_code::invalid_argument, which + " is not a 40-character Z85 key (" + std::to_string(k.size()) + " characters)"};
    if (r == rank && k != o.curve->own.public_key)
      return {status_code::invalid_argument, which + " (" + key_fingerprint(k) + "...) is this rank's entry but not its own public key (" +
                                                 key_fingerprint(o.curve->own.public_key) + "...)"};
    if (r != rank && std::find(accepted.begin(), accepted.end(), k) == accepted.end())
      return {status_code::invalid_argument, which + " (" + key_fingerprint(k) +
                                                 "...) is not among the endpoint's accepted keys: that rank could not connect"};
    for (int q = 0; q < r; ++q)
      if (keys[static_cast<std::size_t>(q)] == k)
        return {status_code::invalid_argument, "ranks " + std::to_string(q) + " and " + std::to_string(r) + " have the same public key " +
                                                   key_fingerprint(k) + "..."};
  }
  return status::ok();
}

}  // namespace

// --- endpoint ---------------------------------------------------------------------------------

zmq_data_endpoint::zmq_data_endpoint(std::shared_ptr<zmq::context_t> context, std::unique_ptr<zap_handler> zap,
                                     std::unique_ptr<connection_guard> guard, std::unique_ptr<zmq::socket_t> socket,
                                     std::string address, zmq_group_options options)
    : context_(std::move(context)),
      zap_(std::move(zap)),
      guard_(std::move(guard)),
      socket_(std::move(socket)),
      address_(std::move(address)),
      options_(std::move(options)) {}

zmq_data_endpoint::zmq_data_endpoint(zmq_data_endpoint&&) noexcept = default;

zmq_data_endpoint& zmq_data_endpoint::operator=(zmq_data_endpoint&& other) noexcept {
  if (this == &other) return *this;
  release();  // a member-wise move would drop the old context first, with its socket still open
  context_ = std::move(other.context_);
  zap_ = std::move(other.zap_);
  guard_ = std::move(other.guard_);
  socket_ = std::move(other.socket_);
  address_ = std::move(other.address_);
  options_ = std::move(other.options_);
  return *this;
}

zmq_data_endpoint::~zmq_data_endpoint() { release(); }

void zmq_data_endpoint::release() {
  socket_.reset();  // every socket of the context closed before it terminates
  guard_.reset();   // its monitor socket
  zap_.reset();     // its REP socket
  context_.reset();
}

result<zmq_data_endpoint> bind_data_endpoint(const std::string& where, const zmq_group_options& options,
                                             std::shared_ptr<zmq::context_t> context) {
  if (status s = check_options(options); !s) return status{s.code(), "bind_data_endpoint: " + s.message()};
  const std::string address = where.find("://") == std::string::npos ? "tcp://" + where + ":*" : where;
  if (options.curve)
    if (status s = check_curve(*options.curve, address, context != nullptr); !s)
      return status{s.code(), "bind_data_endpoint: " + s.message()};
  // Made in this order and, on a failure, destroyed in reverse before `context` (a parameter):
  // the context terminates with every socket closed.
  std::unique_ptr<zap_handler> zap;
  std::unique_ptr<connection_guard> guard;
  std::unique_ptr<zmq::socket_t> socket;
  try {
    // Two I/O threads: a ring rank receives from its predecessor while it sends to its successor,
    // and with one thread both streams (and, with CURVE, their decryption and encryption) share
    // a core; curve_bench measures a 3-rank refit 1.3x (plain) to 1.7x (CURVE) faster with two.
    if (!context) context = std::make_shared<zmq::context_t>(2);
    socket = std::make_unique<zmq::socket_t>(*context, zmq::socket_type::router);
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::router_mandatory, true);
    socket->set(zmq::sockopt::rcvhwm, options.queue_messages);
    std::int64_t max_message = static_cast<std::int64_t>(zmq_wire::header_bytes + std::max<std::size_t>(options.chunk_bytes, 4096));
    if (options.curve) {
      const zmq_group_curve& c = *options.curve;
      const std::string domain = zap_domain(options.group_tag);
      auto z = zap_handler::start(*context, options.log_name, options.log);  // before the bind: no client slips through
      if (!z) return status{z.error().code(), "bind_data_endpoint: " + z.error().message()};
      zap = std::move(z.value());
      for (const std::string& key : c.accepted_public_keys) zap->allow(domain, key, key);
      max_message += curve_message_overhead;
      socket->set(zmq::sockopt::curve_server, true);
      socket->set(zmq::sockopt::curve_secretkey, c.own.secret_key);
      socket->set(zmq::sockopt::zap_domain, domain);
      socket->set(zmq::sockopt::handshake_ivl,
                  static_cast<int>(std::min<std::int64_t>(10'000, options.timeout.count())));
      connection_guard_options g;
      g.log_name = options.log_name;
      g.socket_name = "the data socket " + address;
      g.expected_peers = static_cast<int>(c.accepted_public_keys.size());
      g.max_waiting = 16;
      g.log = options.log;
      auto attached = connection_guard::attach(*context, *socket, std::move(g));
      if (!attached) return status{attached.error().code(), "bind_data_endpoint: " + attached.error().message()};
      guard = std::move(attached.value());
    } else {
      refuse_pre_zmtp3_peers(*socket);
    }
    socket->set(zmq::sockopt::maxmsgsize, max_message);
    socket->bind(address);
    std::string bound = socket->get(zmq::sockopt::last_endpoint);
    if (guard) guard->rename("the data socket " + bound);
    return zmq_data_endpoint(std::move(context), std::move(zap), std::move(guard), std::move(socket), std::move(bound), options);
  } catch (const zmq::error_t& e) {
    return status{status_code::invalid_argument, "bind_data_endpoint: cannot bind '" + address + "': " + e.what()};
  } catch (const std::exception& e) {
    return status{status_code::io_error, "bind_data_endpoint: " + std::string(e.what())};
  }
}

// --- group ------------------------------------------------------------------------------------

zmq_group::zmq_group(int rank, int size, std::unique_ptr<zmq_links> links) : rank_(rank), size_(size), links_(std::move(links)) {}

std::uint64_t zmq_group::dropped_messages() const { return links_->dropped(); }

zmq_group::~zmq_group() {
  try {
    links_->send_bye(broken_.is_ok() ? seq_ : seq_ - 1);
  } catch (...) {  // best effort: the peers time out instead
  }
}

result<std::unique_ptr<zmq_group>> zmq_group::create(int rank, int size, std::vector<std::string> peer_endpoints,
                                                     zmq_data_endpoint own, std::vector<std::string> peer_public_keys) {
  const std::string where = "zmq_group rank " + std::to_string(rank) + " of " + std::to_string(size) + ": ";
  if (size < 1 || rank < 0 || rank >= size) return status{status_code::invalid_argument, where + "rank must be in [0, size)"};
  if (peer_endpoints.size() != static_cast<std::size_t>(size))
    return status{status_code::invalid_argument,
                  where + std::to_string(peer_endpoints.size()) + " peer endpoints given, one per rank expected"};
  if (!own.socket_) return status{status_code::invalid_argument, where + "the data endpoint was moved from"};
  if (status k = check_peer_keys(own.options_, rank, size, peer_public_keys); !k)
    return status{k.code(), where + k.message()};
  auto links = std::make_unique<zmq_links>(rank, size, std::move(own), std::move(peer_public_keys));
  status s;
  try {
    s = links->join(peer_endpoints);
  } catch (const zmq::error_t& e) {
    s = {status_code::io_error, std::string("ZeroMQ: ") + e.what()};
  } catch (const std::bad_alloc&) {
    s = {status_code::out_of_memory, "out of memory"};
  } catch (const std::exception& e) {
    s = {status_code::io_error, e.what()};
  }
  if (!s) {
    const std::string message = where + "joining: " + s.message();
    try {
      links->send_abort(message);
      links->send_bye(0);
    } catch (...) {
    }
    return status{s.code(), message};
  }
  return std::unique_ptr<zmq_group>(new zmq_group(rank, size, std::move(links)));
}

template <class Body>
status zmq_group::run(wire_kind kind, Body&& body) {
  if (!broken_.is_ok()) return {broken_.code(), "group broken by an earlier failure: " + broken_.message()};
  ++seq_;
  links_->begin(kind, seq_);
  status s;
  try {
    s = body();
  } catch (const zmq::error_t& e) {
    s = {status_code::io_error, std::string("ZeroMQ: ") + e.what()};
  } catch (const std::bad_alloc&) {
    s = {status_code::out_of_memory, "out of memory"};
  } catch (const std::exception& e) {
    s = {status_code::io_error, e.what()};
  }
  if (s.is_ok()) return s;
  broken_ = status{s.code(), "zmq_group rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " +
                                 zmq_wire::to_string(kind) + " #" + std::to_string(seq_) + ": " + s.message()};
  try {
    links_->send_abort(broken_.message());
  } catch (...) {
  }
  return broken_;
}

status zmq_group::broadcast_raw(void* data, std::int64_t count, dtype type, int root) {
  return run(wire_kind::broadcast, [&]() -> status {
    if (root < 0 || root >= size_)
      return {status_code::invalid_argument, "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(size_)};
    if (status s = check_count(count, data); !s) return s;
    if (size_ == 1) return status::ok();
    const std::size_t es = size_of(type);
    const std::int64_t per = chunk_elems(links_->options().chunk_bytes, es);
    const std::int64_t chunks = chunks_for(count, per);
    if (status s = check_messages(chunks); !s) return s;
    const ring_wire w(*links_, rank_, size_, static_cast<std::uint32_t>(root), type, count);
    if (rank_ == root) {
      for (std::int64_t c = 0; c < chunks; ++c) {
        const piece p = chunk_of(count, per, c);
        zmq::message_t msg = zmq_links::make_message(w.head(c, static_cast<std::size_t>(p.n) * es), bytes_at(data, p.begin, es));
        if (status s = links_->send(w.right, msg); !s) return s;
      }
      auto done = links_->receive(w.left, w.want(0, 0));  // the last rank has every chunk
      return done ? status::ok() : done.error();
    }
    for (std::int64_t c = 0; c < chunks; ++c) {
      const piece p = chunk_of(count, per, c);
      const std::size_t bytes = static_cast<std::size_t>(p.n) * es;
      auto msg = links_->receive(w.left, w.want(c, bytes));
      if (!msg) return msg.error();
      copy_bytes(bytes_at(data, p.begin, es), zmq_links::payload(*msg), bytes);
      if (w.right == root) continue;
      zmq_links::write_header(*msg, w.head(c, bytes));
      if (status s = links_->send(w.right, *msg); !s) return s;
    }
    if (w.right != root) return status::ok();
    zmq::message_t done = zmq_links::make_message(w.head(0, 0), nullptr);
    return links_->send(w.right, done);
  });
}

status zmq_group::all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) {
  return run(wire_kind::all_gather, [&]() -> status {
    if (status s = check_count(count_per_rank, in, out); !s) return s;
    const std::size_t es = size_of(type);
    copy_bytes(bytes_at(out, rank_ * count_per_rank, es), in, static_cast<std::size_t>(count_per_rank) * es);
    if (size_ == 1) return status::ok();
    const int steps = size_ - 1;
    const std::int64_t per = chunk_elems(links_->options().chunk_bytes, es);
    const std::int64_t chunks = chunks_for(count_per_rank, per);
    if (status s = check_messages(chunks * steps); !s) return s;
    const ring_wire w(*links_, rank_, size_, 0, type, count_per_rank);
    for (std::int64_t c = 0; c < chunks; ++c) {  // chunk c of every block, as a wave around the ring
      const piece p = chunk_of(count_per_rank, per, c);
      const std::size_t bytes = static_cast<std::size_t>(p.n) * es;
      zmq::message_t own = zmq_links::make_message(w.head(c * steps, bytes), bytes_at(in, p.begin, es));
      if (status s = links_->send(w.right, own); !s) return s;
      for (int step = 0; step < steps; ++step) {
        const int block = ring(rank_ - step - 1, size_);
        auto msg = links_->receive(w.left, w.want(c * steps + step, bytes));
        if (!msg) return msg.error();
        copy_bytes(bytes_at(out, block * count_per_rank + p.begin, es), zmq_links::payload(*msg), bytes);
        if (step == steps - 1) continue;  // block `block` started at rank `right`
        zmq_links::write_header(*msg, w.head(c * steps + step + 1, bytes));
        if (status s = links_->send(w.right, *msg); !s) return s;
      }
    }
    return status::ok();
  });
}

status zmq_group::reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) {
  if (status s = refuse_reduction(type, rank_, size_, wire_kind::reduce_scatter); !s) return s;
  return run(wire_kind::reduce_scatter, [&]() -> status {
    if (status s = check_count(count_per_rank, in, out); !s) return s;
    const std::size_t es = size_of(type);
    if (size_ == 1) {
      copy_bytes(out, in, static_cast<std::size_t>(count_per_rank) * es);
      return status::ok();
    }
    const int steps = size_ - 1;
    const std::size_t ps = zmq_reduce::partial_size_of(type);
    const std::int64_t per = chunk_elems(links_->options().chunk_bytes, ps);
    const std::int64_t chunks = chunks_for(count_per_rank, per);
    if (status s = check_messages(chunks * steps); !s) return s;
    const ring_wire w(*links_, rank_, size_, 0, type, count_per_rank);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const piece p = chunk_of(count_per_rank, per, c);
      const std::size_t bytes = static_cast<std::size_t>(p.n) * ps;
      const auto mine = [&](int block) { return bytes_at(in, block * count_per_rank + p.begin, es); };
      // Block k's partial starts here at rank k+1: this rank starts block rank-1.
      zmq::message_t start = zmq_links::make_message(w.head(c * steps, bytes), nullptr);
      zmq_reduce::start_partial(type, zmq_links::payload(start), mine(ring(rank_ - 1, size_)), p.n);
      if (status s = links_->send(w.right, start); !s) return s;
      for (int step = 0; step < steps; ++step) {
        const int block = ring(rank_ - step - 2, size_);
        auto msg = links_->receive(w.left, w.want(c * steps + step, bytes));
        if (!msg) return msg.error();
        if (step == steps - 1) {  // block == rank_: this rank's value goes in last, rounded once
          zmq_reduce::finish_partial(type, reduce_op::sum, bytes_at(out, p.begin, es), zmq_links::payload(*msg), mine(block), p.n);
          continue;
        }
        zmq_reduce::add_to_partial(type, reduce_op::sum, zmq_links::payload(*msg), mine(block), p.n);
        zmq_links::write_header(*msg, w.head(c * steps + step + 1, bytes));
        if (status s = links_->send(w.right, *msg); !s) return s;
      }
    }
    return status::ok();
  });
}

status zmq_group::all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) {
  if (status s = refuse_reduction(type, rank_, size_, wire_kind::all_reduce); !s) return s;
  return run(wire_kind::all_reduce, [&]() -> status {
    if (status s = check_count(count, data); !s) return s;
    if (size_ == 1) return status::ok();
    const int steps = size_ - 1;
    const std::size_t es = size_of(type);
    const std::size_t ps = zmq_reduce::partial_size_of(type);
    const auto seg_begin = [&](int k) { return k * count / size_; };
    const auto seg_len = [&](int k) { return seg_begin(k + 1) - seg_begin(k); };
    const std::int64_t longest = (count + size_ - 1) / size_;
    const std::int64_t per_partial = chunk_elems(links_->options().chunk_bytes, ps);
    const std::int64_t per_elem = chunk_elems(links_->options().chunk_bytes, es);
    const std::int64_t reduce_chunks = chunks_for(longest, per_partial);
    const std::int64_t gather_chunks = chunks_for(longest, per_elem);
    const std::int64_t gather_base = reduce_chunks * steps;
    if (status s = check_messages((reduce_chunks + gather_chunks) * steps); !s) return s;
    const ring_wire w(*links_, rank_, size_, op == reduce_op::sum ? 0 : 1, type, count);
    // Reduce-scatter: segment k's partial starts at rank k+1 and ends, complete, at rank k.
    for (std::int64_t c = 0; c < reduce_chunks; ++c) {
      const auto part = [&](int k) { return chunk_of(seg_len(k), per_partial, c); };
      const auto mine = [&](int k) { return bytes_at(data, seg_begin(k) + part(k).begin, es); };
      const int first = ring(rank_ - 1, size_);
      zmq::message_t start = zmq_links::make_message(w.head(c * steps, static_cast<std::size_t>(part(first).n) * ps), nullptr);
      zmq_reduce::start_partial(type, zmq_links::payload(start), mine(first), part(first).n);
      if (status s = links_->send(w.right, start); !s) return s;
      for (int step = 0; step < steps; ++step) {
        const int k = ring(rank_ - step - 2, size_);
        const std::size_t bytes = static_cast<std::size_t>(part(k).n) * ps;
        auto msg = links_->receive(w.left, w.want(c * steps + step, bytes));
        if (!msg) return msg.error();
        if (step == steps - 1) {  // k == rank_: in place; this rank's value was read last, here
          zmq_reduce::finish_partial(type, op, mine(k), zmq_links::payload(*msg), mine(k), part(k).n);
          continue;
        }
        zmq_reduce::add_to_partial(type, op, zmq_links::payload(*msg), mine(k), part(k).n);
        zmq_links::write_header(*msg, w.head(c * steps + step + 1, bytes));
        if (status s = links_->send(w.right, *msg); !s) return s;
      }
    }
    // All-gather: each finished segment travels the ring unchanged.
    for (std::int64_t c = 0; c < gather_chunks; ++c) {
      const auto part = [&](int k) { return chunk_of(seg_len(k), per_elem, c); };
      const auto at = [&](int k) { return bytes_at(data, seg_begin(k) + part(k).begin, es); };
      zmq::message_t own =
          zmq_links::make_message(w.head(gather_base + c * steps, static_cast<std::size_t>(part(rank_).n) * es), at(rank_));
      if (status s = links_->send(w.right, own); !s) return s;
      for (int step = 0; step < steps; ++step) {
        const int k = ring(rank_ - step - 1, size_);
        const std::size_t bytes = static_cast<std::size_t>(part(k).n) * es;
        auto msg = links_->receive(w.left, w.want(gather_base + c * steps + step, bytes));
        if (!msg) return msg.error();
        copy_bytes(at(k), zmq_links::payload(*msg), bytes);
        if (step == steps - 1) continue;
        zmq_links::write_header(*msg, w.head(gather_base + c * steps + step + 1, bytes));
        if (status s = links_->send(w.right, *msg); !s) return s;
      }
    }
    return status::ok();
  });
}

}  // namespace tandem::gpu
