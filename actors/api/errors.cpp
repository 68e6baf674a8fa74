// Names of tandem's actor error codes.
#include "actors/api/errors.hpp"

namespace tandem {

std::string to_string(tandem_errc code) {
  switch (code) {
    case tandem_errc::wrong_state: return "wrong_state";
    case tandem_errc::stale_version: return "stale_version";
    case tandem_errc::invalid_config: return "invalid_config";
    case tandem_errc::engine_failure: return "engine_failure";
    case tandem_errc::peer_lost: return "peer_lost";
    case tandem_errc::timeout: return "timeout";
  }
  return "unknown";
}

}  // namespace tandem
