// The tandem executable: every subcommand lives in tools/cli/*_command.cpp.
#include <iostream>

#include "tools/cli/commands.h"

int main(int argc, char** argv) {
  const tandem::cli::args a(argv + 1, argv + argc);
  try {
    return tandem::cli::run_cli(a, std::cout, std::cerr);
  } catch (const std::exception& e) {  // a bug, not bad input: say so instead of aborting
    std::cerr << "tandem: internal error: " << e.what() << "\n";
    return 70;
  }
}
