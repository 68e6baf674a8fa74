// What the controller's remote proxies (remote_policy.hpp, remote_rollout.hpp) share: the message
// that hands them their worker's control frames, and the routing rule that picks the proxy.
#pragma once

#include <caf/atom.hpp>

#include "actors/bridge/bridge.hpp"
#include "orchestration/control/messages.hpp"

namespace tandem {

/// (rmt_in, message): a control message from the proxy's worker, routed by the controller actor.
using rmt_in_atom = caf::atom_constant<caf::atom("rmt_in")>;

/// Whether a worker's message answers a request of its policy proxy (true) or of its rollout
/// proxy (false). Answers to a refit_begin go to the rollout proxy on a worker that hosts a
/// rollout worker (the policy root of a stream never does).
bool for_policy_proxy(const control::message& m, bool worker_hosts_rollout);

/// Who a proxy stands for and where its frames go.
struct remote_target {
  std::string name;           ///< "policy-1", in every reply and error
  std::int32_t rank = 0;      ///< the worker rank
  std::string peer;           ///< the worker's routing id ("w3")
  bridge_actor bridge;        ///< the controller's bridge
};

}  // namespace tandem
