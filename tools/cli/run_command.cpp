// `tandem run RECIPE --dry-run`: resolve, validate, load the model config, print the plan.
#include "orchestration/config/resolve.h"
#include "orchestration/topology/memory_plan.h"
#include "orchestration/topology/placement.h"
#include "orchestration/topology/plan_report.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_resolution.h"

namespace tandem::cli {

int run_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_args p = parse_args(a, {"--dry-run"});
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
  if (!p.flags.count("--dry-run")) {
    err << "tandem run: running the RL loop is not implemented yet; `tandem run " << *p.recipe
        << " --dry-run` prints the plan\n";
    return exit_usage;
  }
  const topology::placement_plan plan = topology::plan_placement(r.recipe->config);
  const topology::memory_plan mem = topology::plan_memory(r.recipe->config, plan.sizes, model->facts);
  out << topology::render_plan(*r.recipe, model->facts, plan, mem);
  return exit_ok;
}

}  // namespace tandem::cli
