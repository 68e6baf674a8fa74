// `tandem join --controller ADDR --rank R --world W`: one member process (actors/member/member.hpp).
// Every setting can also come from the environment, so a launcher (Slurm, a shell loop) can start
// the same command line everywhere; a flag wins over its variable:
//   --controller ADDR        TANDEM_CONTROLLER     the controller's ROUTER, tcp://host:port
//   --rank R                 TANDEM_RANK           this member's rank, 0 .. W-1
//   --world W                TANDEM_WORLD          members in the run
//   --local-members N        TANDEM_LOCAL_MEMBERS  members on this node (thread caps); default W
//   --welcome-timeout-ms MS  TANDEM_WELCOME_TIMEOUT_MS   default 60000
// TANDEM_PARENT_PID (set by a controller that spawned this member): die with that process.
// The run's keys (CurveZMQ): TANDEM_KEYS_FD, a descriptor a spawning controller handed over, or
// TANDEM_KEYS, the path of the run's keys file (0600; `tandem keys`). Without either the member
// runs unauthenticated, which only a controller on loopback with cluster.secure: false accepts.
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "actors/runtime/run_keys.hpp"
#include "actors/member/member.hpp"
#include "tools/cli/commands.h"

namespace tandem::cli {

namespace {

struct setting {
  const char* flag;
  const char* variable;
  std::optional<std::string> value;  // the flag's, else the variable's
  std::string source;                // "--rank" or "TANDEM_RANK"
};

/// The integer in `text`, or nullopt when it is not exactly one.
std::optional<std::int64_t> integer(const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace

int join_command(const args& a, std::ostream& out, std::ostream& err) {
  (void)out;
  std::map<std::string, setting> settings = {
      {"--controller", {"--controller", "TANDEM_CONTROLLER", std::nullopt, ""}},
      {"--rank", {"--rank", "TANDEM_RANK", std::nullopt, ""}},
      {"--world", {"--world", "TANDEM_WORLD", std::nullopt, ""}},
      {"--local-members", {"--local-members", "TANDEM_LOCAL_MEMBERS", std::nullopt, ""}},
      {"--welcome-timeout-ms", {"--welcome-timeout-ms", "TANDEM_WELCOME_TIMEOUT_MS", std::nullopt, ""}},
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string flag = a[i];
    std::optional<std::string> value;
    if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto it = settings.find(flag);
    if (it == settings.end()) {
      err << "tandem join: unknown argument '" << a[i]
          << "' (options: --controller, --rank, --world, --local-members, --welcome-timeout-ms)\n";
      return exit_usage;
    }
    if (!value) {
      if (i + 1 == a.size()) {
        err << "tandem join: " << flag << " needs a value\n";
        return exit_usage;
      }
      value = a[++i];
    }
    it->second.value = value;
    it->second.source = flag;
  }
  for (auto& [flag, s] : settings) {
    if (s.value) continue;
    if (const char* v = std::getenv(s.variable)) {
      s.value = v;
      s.source = s.variable;
    }
  }

  member_options o;
  const auto required = [&](const std::string& flag, const char* what) -> const std::string* {
    const setting& s = settings.at(flag);
    if (s.value) return &*s.value;
    err << "tandem join: missing " << what << " (" << flag << " or " << s.variable << "; see `tandem help join`)\n";
    return nullptr;
  };
  const auto number = [&](const std::string& flag, std::int64_t& into) {
    const setting& s = settings.at(flag);
    if (!s.value) return true;
    const auto v = integer(*s.value);
    if (!v) {
      err << "tandem join: " << s.source << ": '" << *s.value << "' is not an integer\n";
      return false;
    }
    into = *v;
    return true;
  };
  const std::string* controller = required("--controller", "the controller's address");
  if (!controller || !required("--rank", "the member's rank") || !required("--world", "the world size")) return exit_usage;
  o.controller = *controller;
  std::int64_t welcome_ms = o.welcome_timeout.count();
  if (!number("--rank", o.rank) || !number("--world", o.world) || !number("--local-members", o.local_members) ||
      !number("--welcome-timeout-ms", welcome_ms))
    return exit_usage;
  if (welcome_ms <= 0) {
    err << "tandem join: the welcome timeout must be positive, not " << welcome_ms << " ms\n";
    return exit_usage;
  }
  o.welcome_timeout = std::chrono::milliseconds(welcome_ms);
  if (const char* parent = std::getenv("TANDEM_PARENT_PID")) {
    const auto pid = integer(parent);
    if (!pid || *pid <= 0) {
      err << "tandem join: TANDEM_PARENT_PID: '" << parent << "' is not a process id\n";
      return exit_usage;
    }
    o.parent_pid = *pid;
  }
  auto keys = member_keys_from_environment();
  if (!keys) {
    err << "tandem join: " << keys.error().message() << "\n";
    return exit_usage;
  }
  o.keys = std::move(keys.value());
  const member_result r = run_member(o);  // prints its last line to stderr
  return r.exit_code;
}

}  // namespace tandem::cli
