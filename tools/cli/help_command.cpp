// `tandem help [command]`.
#include "tools/cli/commands.h"

namespace tandem::cli {
namespace {

constexpr const char* overview = R"(tandem: GRPO/DAPO post-training of Gemma 4 models

usage: tandem <command> [arguments]

commands:
  validate RECIPE [key=value ...]    print the resolved configuration, or every error in it
  validate --minimize RECIPE         list keys a recipe sets to the value it already inherits
  validate --schema                  print every recipe key with its default and description
  run RECIPE [key=value ...] --dry-run
                                     print the placement plan: workers, devices, data-parallel
                                     ranks, the controller's endpoints and per-phase memory
  help [command]                     this text, or one command's
  --version                          version and compute backends of this build

Overrides are dotted key paths with YAML values, applied after the recipe and its parents:
  tandem validate configs/recipes/tiny-cpu.yaml grpo.num_prompts_per_step=8 policy.generation.top_k=20

exit status: 0 ok, 1 the recipe was refused (errors on stderr), 2 usage error
)";

constexpr const char* validate_help = R"(usage: tandem validate RECIPE [key=value ...]
       tandem validate --minimize RECIPE
       tandem validate --schema

Resolves RECIPE: its `defaults:` parents (paths relative to the file, merged in order), then the
recipe, then the overrides, over the schema defaults. Prints the result as YAML, each value
commented with the file:line:column (or override) that set it. On errors prints every one as
  FILE:LINE:COLUMN: error: KEY.PATH: MESSAGE
and exits 1. --minimize prints the recipe's keys whose value equals what it inherits (exit 1 if
any). --schema prints the documented schema.
)";

constexpr const char* run_help = R"(usage: tandem run RECIPE [key=value ...] --dry-run

Resolves and validates RECIPE like `tandem validate`, loads the model's config.json, and prints
the placement plan: one worker process per device, which actors each hosts (policy_worker,
rollout_worker), data-parallel and rollout ranks, the controller's control-plane endpoint, the
step arithmetic, and the memory budget of each phase per device.

Running the RL loop itself is not built yet; `tandem run` without --dry-run says so and exits 2.
)";

}  // namespace

int help_command(const args& a, std::ostream& out, std::ostream& err) {
  if (a.empty()) {
    out << overview;
    return exit_ok;
  }
  if (a[0] == "validate") out << validate_help;
  else if (a[0] == "run") out << run_help;
  else if (a[0] == "help" || a[0] == "version" || a[0] == "--version") out << overview;
  else {
    err << "tandem help: unknown command '" << a[0] << "'\n";
    return exit_usage;
  }
  return exit_ok;
}

}  // namespace tandem::cli
