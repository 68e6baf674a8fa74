// `tandem run RECIPE [--dry-run] [--no-spawn] [--fresh]`: resolve, validate, load the model config;
// print the plan, or run it (the controller here, the members of this node spawned here unless
// --no-spawn) into its run directory (logger.log_dir; --fresh: a new sibling when it holds a run).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "actors/controller/controller.hpp"
#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/run_task.hpp"
#include "actors/runtime/run_keys.hpp"
#include "gpu/core/printable.h"
#include "orchestration/config/not_built.h"
#include "orchestration/config/render.h"
#include "orchestration/control/frame_limits.hpp"
#include "orchestration/config/resolve.h"
#include "orchestration/topology/memory_plan.h"
#include "orchestration/topology/placement.h"
#include "orchestration/topology/plan_report.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_resolution.h"
#include "tools/cli/run_output.h"
#include "tools/cli/run_preparation.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

/// The recipe as the run uses it: policy.model_name names the directory `model` was found in, as
/// an absolute path, so every member (spawned here or started elsewhere, in any directory) opens
/// the checkpoint the controller resolved, and the run's recipe.yaml runs the same model again.
config::resolved_recipe with_model_directory(const config::resolved_recipe& asked, const resolved_model& model) {
  config::resolved_recipe r = asked;
  std::error_code ec;
  const fs::path absolute = fs::absolute(model.directory, ec).lexically_normal();
  const std::string path = (ec ? model.directory : absolute).string();
  if (path == asked.config.policy.model_name) return r;
  r.config.policy.model_name = path;
  r.values.at("policy.model_name") = {config::config_value{path},
                                      config::source_location{"tandem run: '" + asked.config.policy.model_name + "' (" +
                                                              asked.origin("policy.model_name").to_string() + ")"}};
  return r;
}

/// Runs the plan; progress lines on `out`.
/// The dry run's memory plan in one line, printed as a CUDA run starts, so the device memory each
/// step's record and log line show in use can be read beside it.
std::string memory_plan_line(const config::recipe_config& c, const topology::placement_plan& plan,
                             const topology::model_facts& facts) {
  const topology::memory_plan mem = topology::plan_memory(c, plan.sizes, facts);
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  char text[320];
  std::snprintf(text, sizeof text,
                "memory plan per device: training %.2f GiB, logprobs %.2f GiB, generation %.2f GiB (a KV cache of %.2f GiB); "
                "every step's record puts what is in use as each turn ends beside it (memory/*_in_use_gib, *_planned_gib)",
                mem.training.total_bytes() / gib, mem.logprobs.total_bytes() / gib, mem.generation.total_bytes() / gib,
                std::max(mem.kv_cache_bytes, 0.0) / gib);
  return text;
}

int execute(const config::resolved_recipe& asked, const resolved_model& model, bool spawn, bool fresh, std::ostream& out,
            std::ostream& err) {
  const config::resolved_recipe r = with_model_directory(asked, model);
  const config::recipe_config& c = r.config;
  if (const config::config_errors missing = config::missing_data_files(r); !missing.empty()) {
    err << config::to_string(missing);
    return exit_refused;
  }
  // The Gemma 4 engines load the checkpoint: checked (headers and names, no weight read) before
  // any member starts, so a preset without weights or a broken file fails here, once.
  if (c.runtime.engine == config::engine_kind::gemma4) {
    if (auto checkpoint = open_policy_checkpoint(c); !checkpoint) {
      const config::source_location& at = asked.origin("policy.model_name");
      err << (at.is_default() ? asked.file : at.to_string()) << ": error: " << checkpoint.error().message() << "\n";
      return exit_refused;
    }
  }
  // The prompt sets and the reward, as the controller's RL loop will build them: a bad dataset
  // line, a missing tokenizer.json or a task not built fails here, before any member starts.
  if (auto task = load_run_task(c); !task) {
    err << asked.file << ": error: " << task.error().message() << "\n";
    return exit_refused;
  }
  controller_options o;
  o.plan = topology::plan_placement(c);
  o.heartbeat_interval = std::chrono::milliseconds(c.runtime.heartbeat_interval_ms);
  o.heartbeat_timeout = std::chrono::milliseconds(c.runtime.heartbeat_timeout_ms);
  // One node, members spawned here: every member is a child of this process, so any free port will
  // do (two runs on one machine never collide). Otherwise the launcher's (or the user's) members
  // dial the recipe's address, cluster.controller_host:controller_port.
  if (spawn && c.cluster.num_nodes == 1) o.bind_endpoint = "tcp://" + c.cluster.controller_host + ":*";
  std::int64_t local = 0;
  for (const auto& w : o.plan.members) local += w.node == 0 ? 1 : 0;
  o.spawn_local = spawn ? local : 0;
  auto keys = controller_keys(c.cluster.secure, static_cast<std::int64_t>(o.plan.members.size()), o.spawn_local);
  if (!keys) {
    err << r.file << ": " << keys.error().message() << "\n";
    return exit_refused;
  }
  o.keys = std::move(keys.value());
  o.max_frame_bytes = control::controller_frame_limit(c);
  // The run's directory, made and checked before any member starts; everything the run writes goes
  // there (tools/cli/run_preparation.h).
  auto prepared = prepare_run(r, fresh);
  if (!prepared) {
    err << "tandem run: " << gpu::printable(prepared.error().message, std::size_t{1} << 16) << "\n";
    return exit_refused;
  }
  o.recipe_yaml = prepared->recipe_yaml;
  o.recipe = prepared->recipe.config;
  o.records = prepared->files;
  o.checkpoints = prepared->checkpoints;
  // The terminal (compact step lines, a bar while a step generates) or timestamped lines, and controller.log.
  run_output lines(out, is_terminal(out), err, is_terminal(err), prepared->files.log);
  lines.out(prepared->first_line);
  for (const auto& note : prepared->notes) lines.out(note);
  if (c.cluster.backend == config::compute_backend::cuda) {
    lines.out(memory_plan_line(c, o.plan, model.facts));
    const topology::memory_plan mem = topology::plan_memory(c, o.plan.sizes, model.facts);
    o.memory_plan = {mem.training.total_bytes(), mem.generation.total_bytes()};
  }
  o.report = [&lines](const std::string& line) { lines.out(line); };  // on several threads, one call per line
  o.step_lines = [&lines](const step_line& line) { lines.step(line.compact, line.full); };
  o.progress = [&lines](std::size_t done, std::size_t total) { lines.generation(done, total); };
  const controller_result result = run_controller(o);
  // A record that could not be written fails the run, however it ended otherwise.
  const std::optional<records::file_error> lost = prepared->files.failure();
  if (result.signal != 0) {  // the members were stopped in order; what was written is whole
    lines.err("tandem run: " + result.message);
    if (lost) lines.err("tandem run: failed: " + lost->message);
    return 128 + result.signal;
  }
  if (!result.ok || lost) {
    lines.err("tandem run: failed: " + (result.ok ? lost->message : result.message));
    return exit_refused;
  }
  lines.out("tandem run: " + result.message);
  // Where the run's results are: its metrics, and their plot (tandem plot), drawn now.
  const std::string dir = prepared->recipe.config.logger.log_dir;
  std::ostringstream plotted, why;
  const std::string png = (std::filesystem::path(dir) / "metrics.png").string();
  const bool drawn = plot_command({dir, "-o", png}, plotted, why) == exit_ok;
  std::string reason = why.str();
  while (!reason.empty() && reason.back() == '\n') reason.pop_back();
  lines.out("tandem run: final weights in " + (std::filesystem::path(dir) / "final_weights").string() +
            "; metrics in " + dir + "/metrics.jsonl (samples in generations.jsonl), " +
            (drawn ? "plotted in " + png : "not plotted (" + reason + "); `tandem plot " + dir + "` draws them"));
  return exit_ok;
}

}  // namespace

int run_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_args p = parse_args(a, {"--dry-run", "--no-spawn", "--fresh"});
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
  // Something this build cannot run refuses the run; a dry run still prints the plan (a recipe for
  // a later build can be planned) and then refuses with the same list.
  const config::config_errors unbuilt = config::unbuilt_settings(*r.recipe);
  const auto refuse_unbuilt = [&] {
    err << "tandem run: " << *p.recipe << " asks for " << unbuilt.size() << (unbuilt.size() == 1 ? " thing" : " things")
        << " this build cannot run yet:\n"
        << config::to_string(unbuilt);
    return exit_refused;
  };
  const bool dry_run = p.flags.count("--dry-run") > 0;
  if (!dry_run && !unbuilt.empty()) return refuse_unbuilt();
  err << config::to_notes(config::engine_ignored_settings(*r.recipe));
  if (!dry_run) return execute(*r.recipe, *model, !p.flags.count("--no-spawn"), p.flags.count("--fresh") > 0, out, err);
  const topology::placement_plan plan = topology::plan_placement(r.recipe->config);
  const topology::memory_plan mem = topology::plan_memory(r.recipe->config, plan.sizes, model->facts);
  out << topology::render_plan(*r.recipe, model->facts, plan, mem);
  return unbuilt.empty() ? exit_ok : refuse_unbuilt();
}

}  // namespace tandem::cli
