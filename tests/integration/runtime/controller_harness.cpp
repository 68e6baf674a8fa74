// A small controller program for the runtime's process tests, until `tandem run` drives the RL
// loop over processes: resolves a recipe, plans the placement, and runs the controller
// (actors/controller/controller.hpp) with its members for a given time or until a failure.
//
//   controller_harness RECIPE [key=value ...] [--seconds S] [--heartbeat-interval-ms N]
//                      [--heartbeat-timeout-ms N] [--join-timeout-ms N] [--stop-timeout-ms N]
//                      [--bind ADDR] [--spawn K] [--member-exe PATH]
//   controller_harness member ...     the same as `tandem join ...` (the default member binary
//                                     is this program itself, found through /proc/self/exe)
//
// Progress lines go to stdout ("controller listening on tcp://127.0.0.1:41234", "spawned member 1
// (pid 1234): ...", "all 4 members joined", "member 1 [...] left after 9 heartbeats (...)"),
// then "ok" (exit 0) or "failed: <the failure>" (exit 1); 2: usage error or a refused recipe.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/controller/controller.hpp"
#include "actors/runtime/run_keys.hpp"
#include "gpu/core/printable.h"
#include "orchestration/config/render.h"
#include "orchestration/control/frame_limits.hpp"
#include "orchestration/config/resolve.h"
#include "orchestration/topology/placement.h"
#include "tools/cli/commands.h"

namespace {

void say(const std::string& line) {
  const std::string text = tandem::gpu::printable(line, std::size_t{1} << 16) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

int usage(const std::string& problem) {
  std::cerr << "controller_harness: " << problem
            << "\nusage: controller_harness RECIPE [key=value ...] [--seconds S] [--heartbeat-interval-ms N]"
               " [--heartbeat-timeout-ms N] [--join-timeout-ms N] [--stop-timeout-ms N] [--bind ADDR] [--spawn K]"
               " [--member-exe PATH]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (!a.empty() && a[0] == "join") return tandem::cli::run_cli(a, std::cout, std::cerr);

  std::map<std::string, std::string> options;
  std::optional<std::string> recipe;
  std::vector<std::string> overrides;
  const std::vector<std::string> known = {"--seconds",
                                          "--heartbeat-interval-ms",
                                          "--heartbeat-timeout-ms",
                                          "--join-timeout-ms",
                                          "--stop-timeout-ms",
                                          "--bind",
                                          "--spawn",
                                          "--member-exe"};
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].starts_with("--")) {
      if (std::find(known.begin(), known.end(), a[i]) == known.end()) return usage("unknown option '" + a[i] + "'");
      if (i + 1 == a.size()) return usage(a[i] + " needs a value");
      options[a[i]] = a[i + 1];
      ++i;
    } else if (a[i].find('=') != std::string::npos) {
      overrides.push_back(a[i]);
    } else if (!recipe) {
      recipe = a[i];
    } else {
      return usage("unexpected argument '" + a[i] + "'");
    }
  }
  if (!recipe) return usage("missing RECIPE");

  const auto r = tandem::config::resolve_recipe(*recipe, overrides);
  if (!r.recipe) {
    std::cerr << tandem::config::to_string(r.errors);
    return 2;
  }
  tandem::controller_options o;
  o.plan = tandem::topology::plan_placement(r.recipe->config);
  o.recipe_yaml = tandem::config::render_resolved(*r.recipe);
  o.run_for = std::chrono::milliseconds(2000);
  o.report = say;
  const auto ms = [&](const std::string& key, std::chrono::milliseconds& into, double scale) -> bool {
    auto it = options.find(key);
    if (it == options.end()) return true;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end != '\0' || v < 0) return false;
    into = std::chrono::milliseconds(static_cast<long long>(v * scale));
    return true;
  };
  if (!ms("--seconds", o.run_for, 1000) || !ms("--heartbeat-interval-ms", o.heartbeat_interval, 1) ||
      !ms("--heartbeat-timeout-ms", o.heartbeat_timeout, 1) || !ms("--join-timeout-ms", o.join_timeout, 1) ||
      !ms("--stop-timeout-ms", o.stop_timeout, 1))
    return usage("a duration option is not a non-negative number");
  if (auto it = options.find("--bind"); it != options.end()) o.bind_endpoint = it->second;
  if (auto it = options.find("--member-exe"); it != options.end()) o.member_executable = it->second;
  if (auto it = options.find("--spawn"); it != options.end()) o.spawn_local = std::atoll(it->second.c_str());
  // The run's keys as `tandem run` takes them: $TANDEM_KEYS, or fresh when every member is spawned here.
  const auto world = static_cast<std::int64_t>(o.plan.members.size());
  auto keys = tandem::controller_keys(r.recipe->config.cluster.secure, world, o.spawn_local < 0 ? world : o.spawn_local);
  if (!keys) {
    std::cerr << keys.error().message() << "\n";
    return 2;
  }
  o.keys = std::move(keys.value());
  o.max_frame_bytes = tandem::control::controller_frame_limit(r.recipe->config);

  const tandem::controller_result result = tandem::run_controller(o);
  say(result.ok ? "ok" : "failed: " + result.message);
  return result.ok ? 0 : 1;
}
