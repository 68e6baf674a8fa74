// `tandem inspect --model DIR [--json]`: opens a checkpoint the way a load does (config, headers,
// index, every tensor's name, dtype and shape) and prints what it holds, reading no weight.
#include "gpu/model/checkpoint.h"
#include "tools/cli/arguments.h"
#include "tools/cli/checkpoint_report.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_resolution.h"

namespace tandem::cli {

int inspect_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--model"}, {"--json"});
  if (!p.problem.empty()) {
    err << "tandem inspect: " << p.problem << "\n";
    return exit_usage;
  }
  if (!p.values.count("--model")) {
    err << "tandem inspect: missing --model DIR (see `tandem help inspect`)\n";
    return exit_usage;
  }
  auto c = open_model_option("inspect", p.values.at("--model"), gpu::dtype::float32, err);
  if (!c) return exit_refused;
  if (p.flags.count("--json")) out << checkpoint_json(*c).dump(2) << "\n";
  else print_checkpoint(*c, out);
  return exit_ok;
}

}  // namespace tandem::cli
