// A member's data-plane groups (data_plane.hpp).
#include "actors/member/data_plane.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "actors/bridge/log_line.hpp"
#include "orchestration/config/rules.h"

namespace tandem {
namespace {

constexpr std::uint64_t data_parallel_tag = 0x7464'7000'0000'0001ull;  // "tdp" ring
constexpr std::uint64_t refit_tag = 0x7464'7000'0000'0002ull;          // refit group

/// Joins the group whose members are `ranks` (member ranks, in group order) at the addresses
/// `address(peer)` gives.
template <class Address>
gpu::result<std::shared_ptr<gpu::communicator>> join_group(const char* group, std::int32_t rank,
                                                            const std::vector<std::int32_t>& ranks,
                                                            const control::peer_table& table, Address address,
                                                            gpu::zmq_data_endpoint own, const std::optional<run_keys>& keys) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank);
  if (me == ranks.end())
    return gpu::status{gpu::status_code::invalid_argument,
                       std::string("the peer table's ") + group + " group does not list member " + std::to_string(rank)};
  std::vector<std::string> endpoints;
  for (const std::int32_t r : ranks) {
    const auto p = std::find_if(table.peers.begin(), table.peers.end(), [&](const control::peer& x) { return x.rank == r; });
    if (p == table.peers.end() || address(*p).empty())
      return gpu::status{gpu::status_code::invalid_argument, std::string("the peer table has no ") + group +
                                                                 " endpoint for member " + std::to_string(r)};
    endpoints.push_back(address(*p));
  }
  std::vector<std::string> peer_keys;  // by group rank: the key that proves each member
  if (keys)
    for (const std::int32_t r : ranks) {
      if (r < 0 || r >= keys->world)
        return gpu::status{gpu::status_code::invalid_argument, std::string("the peer table's ") + group +
                                                                   " group names member " + std::to_string(r) +
                                                                   ", which has no key in this run"};
      peer_keys.push_back(keys->members[static_cast<std::size_t>(r)].public_key);
    }
  auto g = gpu::zmq_group::create(static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
                                  std::move(endpoints), std::move(own), std::move(peer_keys));
  if (!g) return gpu::status{g.error().code(), std::string(group) + " group: " + g.error().message()};
  return std::shared_ptr<gpu::communicator>(std::move(g.value()));
}

}  // namespace

data_plane_membership membership_of(const control::welcome& w, bool colocated) {
  data_plane_membership m;
  m.data_parallel = w.assigned.policy && w.data_parallel_size > 1;
  m.refit = !colocated && ((w.assigned.policy && w.data_parallel_rank == 0) || w.assigned.rollout);
  return m;
}

gpu::result<std::unique_ptr<member_data_plane>> member_data_plane::bind(std::int32_t rank, const std::string& host,
                                                                        data_plane_membership m,
                                                                        std::chrono::milliseconds timeout,
                                                                        const std::optional<run_keys>& keys,
                                                                        const std::string& log_name) {
  std::unique_ptr<member_data_plane> p(new member_data_plane());
  p->rank_ = rank;
  p->keys_ = keys;
  if (keys && (rank < 0 || rank >= keys->world))
    return gpu::status{gpu::status_code::invalid_argument, "member " + std::to_string(rank) + " has no key in this run"};
  const auto endpoint = [&](std::uint64_t tag) -> gpu::result<gpu::zmq_data_endpoint> {
    gpu::zmq_group_options o;
    o.timeout = timeout;
    o.group_tag = tag;
    o.log = log_line;
    o.log_name = log_name + (tag == data_parallel_tag ? " data-parallel port" : " refit port");
    if (keys) {
      gpu::zmq_group_curve c;
      c.own = keys->members[static_cast<std::size_t>(rank)];
      for (const auto& w : keys->members) c.accepted_public_keys.push_back(w.public_key);
      o.curve = c;
    }
    return gpu::bind_data_endpoint(host, o);
  };
  if (m.data_parallel) {
    auto e = endpoint(data_parallel_tag);
    if (!e) return e.error();
    p->data_parallel_endpoint_.emplace(std::move(e.value()));
  }
  if (m.refit) {
    auto e = endpoint(refit_tag);
    if (!e) return e.error();
    p->refit_endpoint_.emplace(std::move(e.value()));
  }
  return p;
}

control::data_endpoint member_data_plane::endpoint_message() const {
  control::data_endpoint m;
  m.rank = rank_;
  if (data_parallel_endpoint_) m.data_parallel_endpoint = data_parallel_endpoint_->address();
  if (refit_endpoint_) m.refit_endpoint = refit_endpoint_->address();
  return m;
}

gpu::status member_data_plane::join(const control::peer_table& table) {
  if (data_parallel_endpoint_) {
    auto g = join_group("data-parallel", rank_, table.ring, table,
                        [](const control::peer& p) -> const std::string& { return p.data_parallel_endpoint; },
                        std::move(*data_parallel_endpoint_), keys_);
    data_parallel_endpoint_.reset();
    if (!g) return g.error();
    data_parallel_ = std::move(g.value());
  }
  if (refit_endpoint_) {
    auto g = join_group("refit", rank_, table.refit_group, table,
                        [](const control::peer& p) -> const std::string& { return p.refit_endpoint; },
                        std::move(*refit_endpoint_), keys_);
    refit_endpoint_.reset();
    if (!g) return g.error();
    refit_ = std::move(g.value());
  }
  return gpu::status::ok();
}

std::string member_data_plane::describe() const {
  std::string out;
  if (data_parallel_endpoint_) out += "data-parallel " + data_parallel_endpoint_->address();
  if (refit_endpoint_) out += std::string(out.empty() ? "" : ", ") + "refit " + refit_endpoint_->address();
  return out.empty() ? "no group (this member has no data-plane peer)" : out;
}

namespace {

/// The host part of "tcp://host:port" (brackets of an IPv6 address removed), or `text` itself.
std::string host_of(const std::string& text) {
  std::string h = text;
  if (const auto scheme = h.find("://"); scheme != std::string::npos) h = h.substr(scheme + 3);
  if (h.starts_with("[")) return h.substr(1, h.find(']') - 1);
  if (const auto colon = h.rfind(':'); colon != std::string::npos && h.find(':') == colon) h = h.substr(0, colon);
  return h;
}

}  // namespace

bool loopback_address(const std::string& host_or_address) { return config::loopback_host(host_of(host_or_address)); }

std::string data_plane_host(const std::string& controller_address) {
  if (const char* h = std::getenv("TANDEM_DATA_HOST"); h != nullptr && *h != '\0') return h;
  if (loopback_address(controller_address)) return "127.0.0.1";
  // The local address of the route to the controller: a UDP socket "connected" there sends
  // nothing, but the kernel picks the interface and source address it would use.
  const std::string host = host_of(controller_address);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string local = "127.0.0.1";
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) == 0 && found != nullptr) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in me{};
    socklen_t n = sizeof me;
    if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &n) == 0) {
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &me.sin_addr, text, sizeof text);
      local = text;
    }
    if (fd >= 0) ::close(fd);
    ::freeaddrinfo(found);
  }
  return local;
}

}  // namespace tandem
