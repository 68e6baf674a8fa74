// Subcommand dispatch.
#include "tools/cli/commands.h"

#include <iostream>

namespace tandem::cli {


int run_cli(const args& a, std::ostream& out, std::ostream& err) {
  if (a.empty()) {
    help_command({}, err, err);
    return exit_usage;
  }
  const std::string& cmd = a[0];
  const args rest(a.begin() + 1, a.end());
  if (cmd == "validate") return validate_command(rest, out, err);
  if (cmd == "run") return run_command(rest, out, err);
  if (cmd == "join") return join_command(rest, out, err);
  if (cmd == "keys") return keys_command(rest, out, err);
  if (cmd == "inspect") return inspect_command(rest, out, err);
  if (cmd == "convert") return convert_command(rest, out, err);
  if (cmd == "logprobs") return logprobs_command(rest, out, err);
  if (cmd == "generate") return generate_command(rest, out, err);
  if (cmd == "loss") return loss_command(rest, out, err);
  if (cmd == "metrics") return metrics_command(rest, out, err);
  if (cmd == "plot") return plot_command(rest, out, err);
  if (cmd == "tokenize") return tokenize_command(rest, std::cin, out, err);
  if (cmd == "dataset") return dataset_command(rest, out, err);
  if (cmd == "init") return init_command(rest, out, err);
  if (cmd == "bench") return bench_command(rest, out, err);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") return help_command(rest, out, err);
  if (cmd == "--version" || cmd == "version") return version_command(out);
  err << "tandem: unknown command '" << cmd << "' (commands: validate, run, join, keys, inspect, convert, logprobs, loss, generate, metrics, plot, tokenize, dataset, init, bench, help, --version)\n";
  return exit_usage;
}

}  // namespace tandem::cli
