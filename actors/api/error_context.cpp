// Tandem errors with their context (error_context.hpp).
#include "actors/api/error_context.hpp"

#include <caf/atom.hpp>
#include <caf/make_message.hpp>
#include <caf/sec.hpp>

namespace tandem {
namespace {

constexpr caf::atom_value tandem_category = caf::atom("tandem");
constexpr caf::atom_value system_category = caf::atom("system");

}  // namespace

caf::error tandem_error(tandem_errc code, std::string text) { return caf::make_error(code, std::move(text)); }

caf::error engine_error(std::string_view where, const gpu::status& status) {
  return tandem_error(tandem_errc::engine_failure,
                      std::string(where) + ": " + gpu::to_string(status.code()) + ": " + status.message());
}

std::string error_text(const caf::error& error) {
  const caf::message& context = error.context();
  if (error.category() == tandem_category) {
    if (context.match_elements<std::string>()) return context.get_as<std::string>(0);
    std::string out = to_string(static_cast<tandem_errc>(error.code()));
    if (!context.empty()) out += " " + caf::to_string(context);
    return out;
  }
  if (error.category() == system_category) {
    std::string out = caf::to_string(static_cast<caf::sec>(error.code()));
    if (!context.empty()) out += " " + caf::to_string(context);
    return out;
  }
  return caf::to_string(error);
}

caf::error relay_error(const caf::error& error, std::string_view where) {
  std::string text = std::string(where) + ": " + error_text(error);
  if (error.category() == tandem_category) return tandem_error(static_cast<tandem_errc>(error.code()), std::move(text));
  if (error.category() == system_category) {
    switch (static_cast<caf::sec>(error.code())) {
      case caf::sec::request_timeout: return tandem_error(tandem_errc::timeout, std::move(text));
      case caf::sec::request_receiver_down: return tandem_error(tandem_errc::peer_lost, std::move(text));
      default: break;
    }
  }
  return caf::error(error.code(), error.category(), caf::make_message(std::move(text)));
}

bool is_tandem_error(const caf::error& error, tandem_errc code) {
  return error.category() == tandem_category && error.code() == static_cast<std::uint8_t>(code);
}

}  // namespace tandem
