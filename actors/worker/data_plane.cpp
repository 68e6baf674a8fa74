// A worker's data-plane groups (data_plane.hpp).
#include "actors/worker/data_plane.hpp"

#include <netdb.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace tandem {
namespace {

constexpr std::uint64_t data_parallel_tag = 0x7464'7000'0000'0001ull;  // "tdp" ring
constexpr std::uint64_t refit_tag = 0x7464'7000'0000'0002ull;          // refit group

/// Joins the group whose members are `ranks` (worker ranks, in group order) at the addresses
/// `address(peer)` gives.
template <class Address>
gpu::result<std::shared_ptr<gpu::communicator>> join_group(const char* group, std::int32_t rank,
                                                            const std::vector<std::int32_t>& ranks,
                                                            const control::peer_table& table, Address address,
                                                            gpu::zmq_data_endpoint own) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank);
  if (me == ranks.end())
    return gpu::status{gpu::status_code::invalid_argument,
                       std::string("the peer table's ") + group + " group does not list worker " + std::to_string(rank)};
  std::vector<std::string> endpoints;
  for (const std::int32_t r : ranks) {
    const auto p = std::find_if(table.peers.begin(), table.peers.end(), [&](const control::peer& x) { return x.rank == r; });
    if (p == table.peers.end() || address(*p).empty())
      return gpu::status{gpu::status_code::invalid_argument, std::string("the peer table has no ") + group +
                                                                 " endpoint for worker " + std::to_string(r)};
    endpoints.push_back(address(*p));
  }
  auto g = gpu::zmq_group::create(static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
                                  std::move(endpoints), std::move(own));
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

gpu::result<std::unique_ptr<worker_data_plane>> worker_data_plane::bind(std::int32_t rank, const std::string& host,
                                                                        data_plane_membership m,
                                                                        std::chrono::milliseconds timeout) {
  std::unique_ptr<worker_data_plane> p(new worker_data_plane());
  p->rank_ = rank;
  const auto endpoint = [&](std::uint64_t tag) -> gpu::result<gpu::zmq_data_endpoint> {
    gpu::zmq_group_options o;
    o.timeout = timeout;
    o.group_tag = tag;
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

control::data_endpoint worker_data_plane::endpoint_message() const {
  control::data_endpoint m;
  m.rank = rank_;
  if (data_parallel_endpoint_) m.data_parallel_endpoint = data_parallel_endpoint_->address();
  if (refit_endpoint_) m.refit_endpoint = refit_endpoint_->address();
  return m;
}

gpu::status worker_data_plane::join(const control::peer_table& table) {
  if (data_parallel_endpoint_) {
    auto g = join_group("data-parallel", rank_, table.ring, table,
                        [](const control::peer& p) -> const std::string& { return p.data_parallel_endpoint; },
                        std::move(*data_parallel_endpoint_));
    data_parallel_endpoint_.reset();
    if (!g) return g.error();
    data_parallel_ = std::move(g.value());
  }
  if (refit_endpoint_) {
    auto g = join_group("refit", rank_, table.refit_group, table,
                        [](const control::peer& p) -> const std::string& { return p.refit_endpoint; },
                        std::move(*refit_endpoint_));
    refit_endpoint_.reset();
    if (!g) return g.error();
    refit_ = std::move(g.value());
  }
  return gpu::status::ok();
}

std::string data_plane_host(const std::string& controller_address) {
  if (const char* h = std::getenv("TANDEM_DATA_HOST"); h != nullptr && *h != '\0') return h;
  if (controller_address.find("127.0.0.1") != std::string::npos || controller_address.find("localhost") != std::string::npos)
    return "127.0.0.1";
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &found) != 0 || found == nullptr) return "127.0.0.1";
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr, text, sizeof text);
  ::freeaddrinfo(found);
  return text;
}

}  // namespace tandem
