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
  std::string problem;
  const auto dir = find_model_directory(p.values.at("--model"), problem);
  if (!dir) {
    err << "tandem inspect: " << problem << "\n";
    return exit_refused;
  }
  auto c = gpu::open_checkpoint(*dir, gpu::dtype::float32);
  if (!c) {
    err << "tandem inspect: " << c.error().message() << "\n";
    return exit_refused;
  }
  if (p.flags.count("--json")) out << checkpoint_json(*c).dump(2) << "\n";
  else print_checkpoint(*c, out);
  return exit_ok;
}

}  // namespace tandem::cli
