// Errors across processes (error_frame.hpp).
#include "actors/remote/error_frame.hpp"

#include "actors/api/error_context.hpp"

namespace tandem {

control::error error_frame(const caf::error& e, std::int32_t rank, control::message_kind request) {
  std::uint16_t code = static_cast<std::uint16_t>(tandem_errc::engine_failure);
  if (e.category() == caf::atom("tandem")) code = e.code();
  return {code, error_text(e), rank, static_cast<std::uint16_t>(request)};
}

caf::error error_of(const control::error& m) {
  const bool known = m.code >= static_cast<std::uint16_t>(tandem_errc::wrong_state) &&
                     m.code <= static_cast<std::uint16_t>(tandem_errc::timeout);
  return tandem_error(known ? static_cast<tandem_errc>(m.code) : tandem_errc::engine_failure, m.text);
}

}  // namespace tandem
