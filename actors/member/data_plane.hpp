// A member's place on the data plane (DESIGN.md section 4): the groups it belongs to, their bound
// endpoints (published through the controller), and the communicators once every peer is known.
//
//   bind (after the welcome): one ZeroMQ endpoint per group this member belongs to
//   join (after the peer table): connect to every peer of each group and wait for all (blocks)
//
// Groups: the data-parallel ring (every policy rank, when there are at least two; gradient
// all-reduce) and the refit group (dedicated runs: the policy root, data-parallel rank 0, first,
// then every rollout worker; the root broadcasts weight buckets). Weight bytes and gradients
// travel only here, member to member, never through the controller.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gpu/comm/communicator.h"
#include "gpu/comm/zmq_group.h"
#include "actors/runtime/run_keys.hpp"
#include "gpu/core/status.h"
#include "orchestration/control/messages.hpp"

namespace tandem {

/// The groups a member belongs to, from its welcome and the recipe.
struct data_plane_membership {
  bool data_parallel = false;  ///< a policy rank of a run with at least two
  bool refit = false;          ///< a dedicated run's policy root or one of its rollout workers
};

data_plane_membership membership_of(const control::welcome& w, bool colocated);

class member_data_plane {
 public:
  /// Binds one endpoint per group of `m` on `host` (an IP address; tcp, ephemeral port).
  /// `timeout`: the longest silence of an awaited peer in any collective. With `keys` every
  /// endpoint is a CURVE server with this member's key pair that admits the run's members' keys
  /// only, and a peer is known by the key it proved (gpu/comm/zmq_group.h); refused
  /// connections and dropped frames are logged as `log_name` lines.
  static gpu::result<std::unique_ptr<member_data_plane>> bind(std::int32_t rank, const std::string& host,
                                                              data_plane_membership m, std::chrono::milliseconds timeout,
                                                              const std::optional<run_keys>& keys = std::nullopt,
                                                              const std::string& log_name = "tandem member");

  /// "data-parallel tcp://10.0.0.3:41234, refit tcp://10.0.0.3:41235" (or "no group").
  std::string describe() const;

  /// This member's data_endpoint message.
  control::data_endpoint endpoint_message() const;

  /// Joins every group of the membership as the peer table lays them out; blocks until every
  /// peer joined or the timeout passed. Fails naming the group and the peers missing.
  gpu::status join(const control::peer_table& table);

  /// The data-parallel ring; null when not a member (or before join).
  std::shared_ptr<gpu::communicator> data_parallel() const { return data_parallel_; }
  /// The refit group (the policy root is its rank 0); null when not a member (or before join).
  std::shared_ptr<gpu::communicator> refit() const { return refit_; }

 private:
  member_data_plane() = default;

  std::int32_t rank_ = 0;
  std::optional<run_keys> keys_;
  std::optional<gpu::zmq_data_endpoint> data_parallel_endpoint_, refit_endpoint_;
  std::shared_ptr<gpu::communicator> data_parallel_, refit_;
};

/// The address this member's data-plane sockets bind (one interface, never a wildcard):
/// $TANDEM_DATA_HOST when set, 127.0.0.1 when the controller is on loopback, else this host's
/// address on the route to the controller (the interface the controller is reached through).
std::string data_plane_host(const std::string& controller_address);

/// True for a loopback host or address: "127.x.x.x", "::1", "localhost", or a tcp:// address of
/// one ("tcp://127.0.0.1:29650").
bool loopback_address(const std::string& host_or_address);

}  // namespace tandem
