// `tandem run RECIPE [--dry-run] [--no-spawn]`: resolve, validate, load the model config; print the
// plan, or run it (the controller here, the workers of this node spawned here unless --no-spawn).
#include <cstdio>

#include "actors/controller/controller.hpp"
#include "actors/runtime/run_keys.hpp"
#include "gpu/core/printable.h"
#include "orchestration/config/render.h"
#include "orchestration/control/frame_limits.hpp"
#include "orchestration/config/resolve.h"
#include "orchestration/topology/memory_plan.h"
#include "orchestration/topology/placement.h"
#include "orchestration/topology/plan_report.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_resolution.h"

namespace tandem::cli {
namespace {

/// Runs the plan; progress lines on `out`.
int execute(const config::resolved_recipe& r, bool spawn, std::ostream& out, std::ostream& err) {
  const config::recipe_config& c = r.config;
  if (c.runtime.engine != config::engine_kind::fake) {
    err << r.file << ": runtime.engine: gemma4: the Gemma 4 train and generate engines are not built yet; "
        << "runtime.engine=fake runs the whole runtime (processes, control and data planes, refits) with "
        << "deterministic fake engines\n";
    return exit_refused;
  }
  controller_options o;
  o.plan = topology::plan_placement(c);
  o.recipe_yaml = config::render_resolved(r);
  o.recipe = c;
  o.heartbeat_interval = std::chrono::milliseconds(c.runtime.heartbeat_interval_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(c.runtime.heartbeat_timeout_ms);
  // One node, workers spawned here: every worker is a child of this process, so any free port will
  // do (two runs on one machine never collide). Otherwise the launcher's (or the user's) workers
  // dial the recipe's address, cluster.controller_host:controller_port.
  if (spawn && c.cluster.num_nodes == 1) o.bind_endpoint = "tcp://" + c.cluster.controller_host + ":*";
  std::int64_t local = 0;
  for (const auto& w : o.plan.workers) local += w.node == 0 ? 1 : 0;
  o.spawn_local = spawn ? local : 0;
  auto keys = controller_keys(c.cluster.secure, static_cast<std::int64_t>(o.plan.workers.size()), o.spawn_local);
  if (!keys) {
    err << r.file << ": " << keys.error().message() << "\n";
    return exit_refused;
  }
  o.keys = std::move(keys.value());
  o.max_frame_bytes = control::controller_frame_limit(c);
  o.report = [&out](const std::string& line) {
    // Called on several threads, one call per line.
    const std::string text = gpu::printable(line, std::size_t{1} << 16) + "\n";
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
  };
  const controller_result result = run_controller(o);
  if (result.signal != 0) {  // the workers were stopped in order; what was written is whole
    err << "tandem run: " << gpu::printable(result.message, std::size_t{1} << 16) << "\n";
    return 128 + result.signal;
  }
  if (!result.ok) {
    err << "tandem run: failed: " << gpu::printable(result.message, std::size_t{1} << 16) << "\n";
    return exit_refused;
  }
  out << "tandem run: " << result.message << "\n";
  return exit_ok;
}

}  // namespace

int run_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_args p = parse_args(a, {"--dry-run", "--no-spawn"});
  if (!p.problem.empty()) {
    err << "tandem run: " << p.problem << "\n";
    return exit_usage;
  }
  if (!p.recipe) {
    err << "tandem run: missing RECIPE (see `tandem help run`)\n";
    return exit_usage;
  }
  config::resolution r = config::resolve_recipe(*p.recipe, p.overrides);
  std::optional<resolved_model> model;
  if (r.recipe) model = resolve_model(*r.recipe, r.errors);
  if (!r.errors.empty()) {
    err << config::to_string(r.errors);
    return exit_refused;
  }
  if (!p.flags.count("--dry-run")) return execute(*r.recipe, !p.flags.count("--no-spawn"), out, err);
  const topology::placement_plan plan = topology::plan_placement(r.recipe->config);
  const topology::memory_plan mem = topology::plan_memory(r.recipe->config, plan.sizes, model->facts);
  out << topology::render_plan(*r.recipe, model->facts, plan, mem);
  return exit_ok;
}

}  // namespace tandem::cli
