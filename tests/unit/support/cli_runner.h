// Runs the tandem CLI in-process and captures its exit code and both streams.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "tools/cli/commands.h"

namespace tandem::test {

struct cli_result {
  int code = -1;
  std::string out, err;
};

inline cli_result cli(const std::vector<std::string>& a) {
  std::ostringstream out, err;
  const int code = cli::run_cli(a, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace tandem::test
