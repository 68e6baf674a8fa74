// The corpus of broken recipes in tests/data/recipes/broken/: each X.yaml (with optional
// overrides, one per line, in X.args) must be refused with exactly the text in X.expected:
// file:line:column, key path and message, every error of the recipe, in order.
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include "orchestration/config/resolve.h"

namespace fs = std::filesystem;
namespace bdata = boost::unit_test::data;
using namespace tandem::config;

namespace {

const fs::path corpus = "tests/data/recipes/broken";  // relative: CTest runs in the source root

std::vector<std::string> corpus_cases() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(fs::path(TANDEM_SOURCE_DIR) / corpus))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(broken_recipes_test)

BOOST_AUTO_TEST_CASE(the_corpus_covers_every_error_class) {
  const auto names = corpus_cases();
  for (const char* needed : {"syntax_error", "unknown_key_misspelt", "wrong_type_text_for_integer",
                             "out_of_range_integer", "missing_parent", "defaults_cycle", "missing_required_key",
                             "duplicate_key", "float_for_integer", "null_for_required_key",
                             "rule_generation_takes_every_gpu", "rule_non_colocated_without_resources",
                             "rule_rollouts_not_multiple_of_global_batch",
                             "rule_global_batch_not_multiple_of_data_parallel", "rule_sequence_lengths_exceed_total",
                             "rule_overlong_buffer_not_shorter", "rule_ratio_clip_c_not_above_one",
                             "rule_batch_multiplier_without_dynamic_sampling", "override_unknown_key",
                             "multi_document"})
    BOOST_TEST((std::find(names.begin(), names.end(), needed) != names.end()), needed);
}

BOOST_DATA_TEST_CASE(each_broken_recipe_is_refused_with_its_exact_located_error, bdata::make(corpus_cases()), name) {
  const fs::path yaml = corpus / (name + ".yaml");
  const fs::path root = TANDEM_SOURCE_DIR;
  std::vector<std::string> overrides;
  if (fs::exists(root / corpus / (name + ".args"))) overrides = lines_of(root / corpus / (name + ".args"));
  BOOST_TEST_CONTEXT("recipe " << yaml.string()) {
    const resolution r = resolve_recipe(yaml.string(), overrides);
    BOOST_TEST(!r.recipe.has_value());
    BOOST_TEST(to_string(r.errors) == slurp(root / corpus / (name + ".expected")));
  }
}

BOOST_AUTO_TEST_CASE(a_valid_parent_of_the_corpus_resolves_cleanly) {
  const resolution r = resolve_recipe((corpus / "parents" / "valid.yaml").string());
  BOOST_TEST(r.errors.empty(), to_string(r.errors));
  BOOST_TEST(r.recipe.has_value());
}

BOOST_AUTO_TEST_CASE(a_directory_or_a_fifo_as_the_recipe_is_refused_saying_so_and_never_blocks) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-recipe-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path fifo = dir / "recipe.yaml";
  BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // nobody writes it: a read would block forever
  const resolution as_dir = resolve_recipe(dir.string());
  BOOST_TEST(to_string(as_dir.errors) == dir.string() + ": error: is a directory, not a recipe file\n");
  const resolution as_fifo = resolve_recipe(fifo.string());
  BOOST_TEST(to_string(as_fifo.errors) ==
             fifo.string() + ": error: is not a regular file (a FIFO, socket or device): a recipe is a YAML file\n");
  // A parent that is a directory is refused where it is named.
  const fs::path child = dir / "child.yaml";
  std::ofstream(child) << "defaults: " << dir.filename().string() << "\n";
  const resolution as_parent = resolve_recipe(child.string());
  BOOST_TEST(!as_parent.errors.empty());
  BOOST_TEST(to_string(as_parent.errors).find("child.yaml:1:11: error: defaults: parent recipe") != std::string::npos,
             to_string(as_parent.errors));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_recipe_of_300k_unknown_keys_reports_the_first_50_and_counts_the_rest) {
  const fs::path dir = fs::temp_directory_path() / ("tandem-big-recipe-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path big = dir / "big.yaml";
  {
    std::ofstream out(big);
    out << "policy:\n  model_name: tiny-all\ngrpo:\n";
    for (int i = 0; i < 300000; ++i) out << "  k" << i << ": 1\n";
  }
  const resolution r = resolve_recipe(big.string());
  BOOST_TEST(r.errors.size() == 300000u);
  const std::string report = to_string(r.errors);
  BOOST_TEST(std::count(report.begin(), report.end(), '\n') == 51);
  BOOST_TEST(report.starts_with(big.string() + ":4:3: error: grpo.k0: unknown key"));
  BOOST_TEST(report.ends_with("... and 299950 more errors (300000 in all; fix these first)\n"), report.substr(report.size() - 200));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
