// `tandem keys FILE --world N`: the run's CurveZMQ keys for members started by hand or by a
// launcher (actors/runtime/run_keys.hpp): written with mode 0600, whole or not at all, never over
// an existing file.
#include <charconv>

#include "actors/runtime/run_keys.hpp"
#include "tools/cli/commands.h"

namespace tandem::cli {

int keys_command(const args& a, std::ostream& out, std::ostream& err) {
  std::optional<std::string> file;
  std::optional<std::int64_t> world;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string flag = a[i], value;
    const bool inline_value = flag.starts_with("--world=");
    if (flag == "--world" || inline_value) {
      if (inline_value) {
        value = flag.substr(8);
      } else if (i + 1 < a.size()) {
        value = a[++i];
      } else {
        err << "tandem keys: --world needs a value\n";
        return exit_usage;
      }
      std::int64_t n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1) {
        err << "tandem keys: --world: '" << value << "' is not a positive integer\n";
        return exit_usage;
      }
      world = n;
    } else if (flag.starts_with("-")) {
      err << "tandem keys: unknown option '" << flag << "' (usage: tandem keys FILE --world N)\n";
      return exit_usage;
    } else if (file) {
      err << "tandem keys: one FILE only, got '" << *file << "' and '" << flag << "'\n";
      return exit_usage;
    } else {
      file = flag;
    }
  }
  if (!file || !world) {
    err << "tandem keys: usage: tandem keys FILE --world N\n";
    return exit_usage;
  }
  auto keys = make_run_keys(*world);
  if (!keys) {
    err << "tandem keys: " << keys.error().message() << "\n";
    return exit_refused;
  }
  if (gpu::status s = write_run_keys_file(*file, *keys); !s) {
    err << "tandem keys: " << s.message() << "\n";
    return exit_refused;
  }
  out << "wrote the keys of a run of " << *world << " members to " << *file
      << " (mode 0600); give it to the controller and to every member started outside it as TANDEM_KEYS=" << *file << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
