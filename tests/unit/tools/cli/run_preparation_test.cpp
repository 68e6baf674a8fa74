// `tandem run`'s start in a run directory (tools/cli/run_preparation.h): a free logger.log_dir is
// used as given; with --fresh a run that moves to a sibling uses it as its logger.log_dir, and the
// recipe.yaml it writes says so and, read back as a recipe, runs in that directory.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "orchestration/config/resolve.h"
#include "support/temp_dir.h"
#include "tools/cli/run_preparation.h"

namespace fs = std::filesystem;
using tandem::test::temp_dir;

namespace {

const std::string tiny = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-fake-cpu.yaml";

tandem::config::resolved_recipe resolved(const fs::path& log_dir) {
  auto r = tandem::config::resolve_recipe(tiny, {"logger.log_dir=" + log_dir.string()});
  BOOST_TEST_REQUIRE(r.errors.empty(), tandem::config::to_string(r.errors));
  return *r.recipe;
}

std::string contents(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_preparation_test)

BOOST_AUTO_TEST_CASE(a_free_log_dir_is_the_run_directory_as_given_and_holds_the_recipe_as_resolved) {
  const temp_dir dir;
  const auto r = resolved(dir.path() / "run");
  auto p = tandem::cli::prepare_run(r, true);
  BOOST_TEST_REQUIRE(static_cast<bool>(p), (p ? std::string() : p.error().message));
  BOOST_TEST(p->first_line == "run directory: " + (dir.path() / "run").string());
  BOOST_TEST(p->recipe.config.logger.log_dir == (dir.path() / "run").string());
  BOOST_TEST(contents(dir.path() / "run" / "recipe.yaml") == p->recipe_yaml);
  BOOST_TEST(p->files.directory == dir.path() / "run");
}

BOOST_AUTO_TEST_CASE(a_run_moved_by_fresh_names_its_sibling_as_its_log_dir_in_the_recipe_it_writes) {
  const temp_dir dir;
  const fs::path asked = dir.path() / "run", sibling = asked.string() + ".2";
  dir.write("run/metrics.jsonl", "{\"step\":1}\n");
  auto p = tandem::cli::prepare_run(resolved(asked), true);
  BOOST_TEST_REQUIRE(static_cast<bool>(p), (p ? std::string() : p.error().message));
  BOOST_TEST(p->first_line == "run directory: " + sibling.string() + " (" + asked.string() + " holds another run)");
  BOOST_TEST(p->recipe.config.logger.log_dir == sibling.string());
  const std::string yaml = contents(sibling / "recipe.yaml");
  BOOST_TEST(yaml == p->recipe_yaml);
  BOOST_TEST(yaml.find("log_dir: " + sibling.string()) != std::string::npos, yaml);
  BOOST_TEST(yaml.find("# tandem run --fresh") != std::string::npos, yaml);
  auto again = tandem::config::resolve_resolved_text(yaml, "recipe.yaml");
  BOOST_TEST_REQUIRE(again.errors.empty(), tandem::config::to_string(again.errors));
  BOOST_TEST(again.recipe->config.logger.log_dir == sibling.string());
  BOOST_TEST(contents(asked / "metrics.jsonl") == "{\"step\":1}\n");
}

BOOST_AUTO_TEST_CASE(without_fresh_a_log_dir_that_holds_a_run_is_refused_and_nothing_is_made) {
  const temp_dir dir;
  dir.write("run/controller.log", "");
  auto p = tandem::cli::prepare_run(resolved(dir.path() / "run"), false);
  BOOST_TEST_REQUIRE(!p);
  BOOST_TEST(p.error().message.find("pass --fresh") != std::string::npos);
  BOOST_TEST(!fs::exists(dir.path() / "run.2"));
  BOOST_TEST(!fs::exists(dir.path() / "run" / "recipe.yaml"));
}

BOOST_AUTO_TEST_SUITE_END()
