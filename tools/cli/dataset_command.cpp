// `tandem dataset check FILE`: reads a prompt dataset (JSON lines; the format is
// orchestration/data/prompt_dataset.h's) as a run will, and prints how many records of each form
// it holds, or the first bad record's file, line and fault.
#include <nlohmann/json.hpp>

#include "orchestration/data/prompt_dataset.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"

namespace tandem::cli {

int dataset_command(const args& a, std::ostream& out, std::ostream& err) {
  if (a.empty() || a[0] != "check") {
    err << "tandem dataset: expected `tandem dataset check FILE` (see `tandem help dataset`)\n";
    return exit_usage;
  }
  const parsed_options p = parse_options(args(a.begin() + 1, a.end()), one_positional("FILE", {}));
  if (!p.problem.empty()) {
    err << "tandem dataset check: " << p.problem << "\n";
    return exit_usage;
  }
  const auto records = data::read_prompt_dataset(p.positional[0]);
  if (!records) {
    err << "tandem dataset check: " << records.error().message << "\n";
    return exit_refused;
  }
  std::size_t plain = 0, chat = 0, tokens = 0;
  for (const auto& r : records.value()) {
    if (r.prompt) ++plain;
    else if (r.input_ids) ++tokens;
    else ++chat;
  }
  out << p.positional[0] << ": " << records->size() << " records (" << plain << " prompt, " << chat << " messages, "
      << tokens << " input_ids), each with an answer\n";
  return exit_ok;
}

}  // namespace tandem::cli
