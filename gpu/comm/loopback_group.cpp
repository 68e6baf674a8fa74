// A zmq_group's ranks in this process over loopback (loopback_group.h).
#include "gpu/comm/loopback_group.h"

#include <optional>
#include <string>
#include <thread>

#include "gpu/comm/curve_keys.h"

namespace tandem::gpu {

result<std::vector<std::unique_ptr<zmq_group>>> join_loopback_group(int n, bool secure, zmq_group_options options) {
  if (n < 1) return status{status_code::invalid_argument, "join_loopback_group: " + std::to_string(n) + " ranks"};
  std::vector<curve_keypair> keys;
  std::vector<std::string> public_keys;
  if (secure)
    for (int r = 0; r < n; ++r) {
      auto k = make_curve_keypair();
      if (!k) return status{k.error().code(), "rank " + std::to_string(r) + ": CurveZMQ keys: " + k.error().message()};
      public_keys.push_back(k->public_key);
      keys.push_back(*k);
    }
  std::vector<std::string> addresses;
  std::vector<std::optional<zmq_data_endpoint>> endpoints;
  for (int r = 0; r < n; ++r) {
    zmq_group_options o = options;
    o.curve.reset();
    if (secure) o.curve = zmq_group_curve{keys[static_cast<std::size_t>(r)], public_keys};
    auto ep = bind_data_endpoint("127.0.0.1", o);
    if (!ep) return status{ep.error().code(), "rank " + std::to_string(r) + ": " + ep.error().message()};
    addresses.push_back(ep->address());
    endpoints.emplace_back(std::move(*ep));
  }
  std::vector<std::unique_ptr<zmq_group>> ranks(static_cast<std::size_t>(n));
  std::vector<std::optional<status>> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> joins;
  for (int r = 0; r < n; ++r)
    joins.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      auto g = zmq_group::create(r, n, addresses, std::move(*endpoints[i]), public_keys);
      if (g) ranks[i] = std::move(*g);
      else errors[i] = g.error();
    });
  for (auto& t : joins) t.join();
  for (int r = 0; r < n; ++r)
    if (const auto& e = errors[static_cast<std::size_t>(r)])
      return status{e->code(), "rank " + std::to_string(r) + " joining: " + e->message()};
  return ranks;
}

}  // namespace tandem::gpu
