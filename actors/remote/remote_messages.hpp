// What the controller's remote proxies (remote_policy.hpp, remote_rollout.hpp) share: the message
// that hands them their worker's control frames, and the routing rule that picks the proxy.
#pragma once

#include <optional>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/typed_response_promise.hpp>

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

/// A request in flight: at most one per kind and proxy.
template <class T>
using pending = std::optional<caf::typed_response_promise<T>>;

/// The promise of `p`, which no longer waits (precondition: it did).
template <class T>
caf::typed_response_promise<T> take(pending<T>& p) {
  auto rp = std::move(*p);
  p.reset();
  return rp;
}

/// Logs a reply of `proxy`'s worker that no request awaits (its deadline passed, or a duplicate).
void log_unawaited(const std::string& proxy, const control::message& m);

/// The error a failed refit_ack carries (engine_failure when it names no code).
caf::error ack_error(const control::refit_ack& a);

}  // namespace tandem
