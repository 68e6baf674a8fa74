// Process-wide CAF configuration.
#include "actors/runtime/system_config.hpp"

#include <algorithm>
#include <string>

#include <caf/message.hpp>

#include "actors/api/errors.hpp"

namespace tandem {

std::size_t scheduler_threads(std::size_t cores, std::size_t processes) {
  return std::max<std::size_t>(1, cores / std::max<std::size_t>(1, processes));
}

system_config::system_config(std::size_t threads) {
  set("scheduler.max-threads", threads);
  add_error_category(caf::atom("tandem"), [](std::uint8_t code, caf::atom_value, const caf::message& context) {
    std::string out = "tandem: " + to_string(static_cast<tandem_errc>(code));
    if (!context.empty()) out += " " + caf::to_string(context);
    return out;
  });
}

}  // namespace tandem
