// The schema walk: every recipe key either takes effect and names the test that shows it, or asks
// for something this build cannot run (refused by `tandem run`), or only configures a switch that
// does. A key that is neither fails here, so no key is accepted and ignored.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "orchestration/config/not_built.h"
#include "orchestration/config/resolve.h"
#include "orchestration/config/schema.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using namespace tandem::config;
using tandem::test::temp_dir;

namespace {

std::vector<std::string> split(const std::string& text, const std::string& sep) {
  std::vector<std::string> out;
  for (std::size_t at = 0;;) {
    const std::size_t next = text.find(sep, at);
    out.push_back(text.substr(at, next - at));
    if (next == std::string::npos) return out;
    at = next + sep.size();
  }
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A recipe whose defaults run on this build: the fake engines on the CPU.
const char* runnable = "policy:\n  model_name: tiny-all\nruntime:\n  engine: fake\ncluster:\n  backend: cpu\n";

/// Overrides an example needs so that the cross-field rules still hold and no other rule fires:
/// the fake engines are refused on cuda (one device, so cuda itself is not), and cuda over
/// several devices with the Gemma 4 engines (not the fake ones, refused on cuda too).
const std::map<std::string, std::vector<std::string>> companions = {
    {"runtime.engine", {"cluster.backend=cuda", "cluster.gpus_per_node=1"}},
    {"cluster.backend", {"runtime.engine=gemma4"}},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(schema_walk_test)

BOOST_AUTO_TEST_CASE(every_key_takes_effect_or_is_refused_as_not_built_or_belongs_to_a_refused_switch) {
  const schema& s = schema::recipes();
  for (const key_spec& k : s.keys()) {
    BOOST_TEST_CONTEXT(k.path) {
      BOOST_TEST((!k.shown_by.empty() || k.unbuilt.has_value() || !k.part_of.empty()),
                 "neither takes effect (shown_by), nor is refused (unbuilt), nor belongs to a switch (part_of)");
      if (!k.part_of.empty()) {
        BOOST_TEST(k.shown_by.empty());
        BOOST_TEST(!k.unbuilt.has_value());
        const key_spec* sw = s.find(k.part_of);
        BOOST_TEST_REQUIRE(sw != nullptr, "part_of names no key: " + k.part_of);
        BOOST_TEST(sw->unbuilt.has_value(), k.part_of + " has no not-built rule");
      }
      if (k.fake_ignores) BOOST_TEST(!k.shown_by.empty(), "a key only the Gemma 4 engines read names the test of its effect");
      if (k.gemma4_ignores) BOOST_TEST(!k.shown_by.empty(), "a key only the fake engines read names the test of its effect");
      BOOST_TEST(!(k.fake_ignores && k.gemma4_ignores), "a key no engine reads");
    }
  }
}

BOOST_AUTO_TEST_CASE(every_test_a_key_names_exists_in_its_file) {
  for (const key_spec& k : schema::recipes().keys()) {
    if (k.shown_by.empty()) continue;
    for (const std::string& entry : split(k.shown_by, "; ")) {
      BOOST_TEST_CONTEXT(k.path << ": " << entry) {
        const std::size_t colon = entry.find(": ");
        const fs::path file = fs::path(TANDEM_SOURCE_DIR) / entry.substr(0, colon);
        BOOST_TEST_REQUIRE(fs::is_regular_file(file), "no such file " + file.string());
        if (colon == std::string::npos) continue;
        const std::string name = entry.substr(colon + 2);
        const std::string text = slurp(file);
        const bool found = text.find("BOOST_AUTO_TEST_CASE(" + name + ")") != std::string::npos ||
                           text.find("BOOST_DATA_TEST_CASE(" + name + ",") != std::string::npos ||
                           text.find("CAF_TEST(" + name + ")") != std::string::npos;
        BOOST_TEST(found, "no test case " + name + " in " + file.string());
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(no_not_built_rule_fires_on_a_runnable_recipe_and_each_fires_alone_for_its_example) {
  temp_dir d;
  const std::string recipe = d.write("runnable.yaml", runnable);
  const resolution base = resolve_recipe(recipe);
  BOOST_TEST_REQUIRE(base.errors.empty(), to_string(base.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*base.recipe)) == "");
  for (const key_spec& k : schema::recipes().keys()) {
    if (!k.unbuilt) continue;
    BOOST_TEST_CONTEXT(k.path << "=" << k.unbuilt->example) {
      std::vector<std::string> overrides = {k.path + "=" + k.unbuilt->example};
      if (companions.count(k.path))
        for (const auto& o : companions.at(k.path)) overrides.push_back(o);
      const resolution r = resolve_recipe(recipe, overrides);
      BOOST_TEST_REQUIRE(r.errors.empty(), to_string(r.errors));
      const config_errors found = unbuilt_settings(*r.recipe);
      BOOST_TEST_REQUIRE(found.size() == 1u, to_notes(found));
      BOOST_TEST(found[0].key == k.path);
      BOOST_TEST(found[0].where.is_override());
      BOOST_TEST(found[0].message.ends_with(": " + k.unbuilt->reason), found[0].message);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
