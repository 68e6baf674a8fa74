// The proxies' routing rule (remote_messages.hpp).
#include "actors/remote/remote_messages.hpp"

#include <variant>

namespace tandem {

bool for_policy_proxy(const control::message& m, bool worker_hosts_rollout) {
  using K = control::message_kind;
  switch (control::kind_of(m)) {
    case K::manifest:
    case K::logprob_result:
    case K::train_result:
      return true;
    case K::refit_ack:
      return std::get<control::refit_ack>(m).stage == control::refit_stage::sent;
    case K::error: {
      const auto request = static_cast<K>(std::get<control::error>(m).request);
      if (request == K::logprob_request || request == K::train_request) return true;
      return request == K::refit_begin && !worker_hosts_rollout;
    }
    default:
      return false;
  }
}

}  // namespace tandem
