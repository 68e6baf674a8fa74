// The proxies' routing rule (remote_messages.hpp).
#include "actors/remote/remote_messages.hpp"

#include <variant>

#include "actors/api/error_context.hpp"
#include "actors/bridge/log_line.hpp"

namespace tandem {

bool for_policy_proxy(const control::message& m, bool worker_hosts_rollout) {
  using K = control::message_kind;
  switch (control::kind_of(m)) {
    case K::manifest:
    case K::logprob_result:
    case K::train_result:
    case K::save_result:
    case K::load_result:
      return true;
    case K::refit_ack:
      return std::get<control::refit_ack>(m).stage == control::refit_stage::sent;
    case K::error: {
      const auto request = static_cast<K>(std::get<control::error>(m).request);
      if (request == K::logprob_request || request == K::train_request || request == K::save_request ||
          request == K::load_request)
        return true;
      return request == K::refit_begin && !worker_hosts_rollout;
    }
    default:
      return false;
  }
}

void log_unawaited(const std::string& proxy, const control::message& m) {
  std::string what(control::to_string(control::kind_of(m)));
  if (const auto* a = std::get_if<control::refit_ack>(&m)) what += " (v" + std::to_string(a->weight_version) + ")";
  log_line("tandem controller: dropped a " + what + " from " + proxy + " that no request awaits (its deadline passed?)");
}

caf::error ack_error(const control::refit_ack& a) {
  const auto code = a.error_code != 0 ? static_cast<tandem_errc>(a.error_code) : tandem_errc::engine_failure;
  return tandem_error(code, a.error);
}

}  // namespace tandem
