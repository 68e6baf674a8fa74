// Argument splitting shared by the subcommands.
#include "tools/cli/arguments.h"

namespace tandem::cli {

parsed_args parse_args(const std::vector<std::string>& a, const std::set<std::string>& known) {
  parsed_args p;
  for (const auto& s : a) {
    if (s.starts_with("--")) {
      if (!known.count(s)) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        p.problem = "unknown option '" + s + "'" + (list.empty() ? "" : " (options: " + list + ")");
        return p;
      }
      p.flags.insert(s);
    } else if (s.find('=') != std::string::npos) {
      p.overrides.push_back(s);
    } else if (!p.recipe) {
      p.recipe = s;
    } else {
      p.problem = "unexpected argument '" + s + "' (overrides are written key.path=value)";
      return p;
    }
  }
  return p;
}

}  // namespace tandem::cli
