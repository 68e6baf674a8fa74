// The committed reference fixtures of tests/data/reference/ (tools/reference/make_fixtures.py):
// where they are, and each one with its config in the other form (config.alt.json: flat keys
// where config.json has per_layer_config, or the reverse), so every parity test runs both.
#pragma once

#include <filesystem>

#include "support/temp_dir.h"

namespace tandem::test {

inline const std::filesystem::path reference_fixtures = std::filesystem::path(TANDEM_SOURCE_DIR) / "tests/data/reference";

/// A directory inside `scratch` holding `fixture`'s files (linked) with config.alt.json as its
/// config.json; valid while `scratch` lives.
inline std::filesystem::path with_alt_config(const std::filesystem::path& fixture, const temp_dir& scratch) {
  namespace fs = std::filesystem;
  const fs::path alt = scratch.path() / fixture.filename();
  fs::create_directories(alt);
  for (const auto& e : fs::directory_iterator(fixture))
    if (e.path().filename() != "config.json") fs::create_symlink(fs::absolute(e.path()), alt / e.path().filename());
  fs::copy_file(fixture / "config.alt.json", alt / "config.json");
  return alt;
}

}  // namespace tandem::test
