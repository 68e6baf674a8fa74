// `tandem validate`: resolved configuration, --minimize, --schema.
#include "orchestration/config/minimize.h"
#include "orchestration/config/not_built.h"
#include "orchestration/config/render.h"
#include "orchestration/config/resolve.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_resolution.h"

namespace tandem::cli {

int validate_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_args p = parse_args(a, {"--minimize", "--schema"});
  if (!p.problem.empty()) {
    err << "tandem validate: " << p.problem << "\n";
    return exit_usage;
  }
  if (p.flags.count("--schema")) {
    if (p.recipe || !p.overrides.empty() || p.flags.size() > 1) {
      err << "tandem validate: --schema takes no other argument\n";
      return exit_usage;
    }
    out << config::render_schema();
    return exit_ok;
  }
  if (!p.recipe) {
    err << "tandem validate: missing RECIPE (see `tandem help validate`)\n";
    return exit_usage;
  }
  if (p.flags.count("--minimize")) {
    if (!p.overrides.empty()) {
      err << "tandem validate: --minimize checks a recipe file and takes no overrides\n";
      return exit_usage;
    }
    const config::minimize_result m = config::find_redundant_keys(*p.recipe);
    if (!m.errors.empty()) {
      err << config::to_string(m.errors);
      return exit_refused;
    }
    for (const auto& k : m.redundant) out << k.to_string() << "\n";
    return m.redundant.empty() ? exit_ok : exit_refused;
  }
  config::resolution r = config::resolve_recipe(*p.recipe, p.overrides);
  if (r.recipe) resolve_model(*r.recipe, r.errors);
  if (!r.errors.empty()) {
    err << config::to_string(r.errors);
    return exit_refused;
  }
  out << config::render_resolved(*r.recipe);
  // Well-formed, but maybe not runnable by this build: say what `tandem run` would refuse.
  err << config::to_notes(config::unbuilt_settings(*r.recipe)) << config::to_notes(config::engine_ignored_settings(*r.recipe));
  return exit_ok;
}

}  // namespace tandem::cli
