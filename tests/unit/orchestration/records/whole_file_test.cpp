// A file written whole appears all at once, through a temporary file that does not remain; one
// that cannot be written names the path and the reason and leaves nothing.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "orchestration/records/whole_file.h"
#include "support/limited_child.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tr = tandem::records;
using tandem::test::temp_dir;

BOOST_AUTO_TEST_SUITE(whole_file_test)

BOOST_AUTO_TEST_CASE(the_text_is_written_whole_and_no_temporary_file_remains) {
  const temp_dir dir;
  BOOST_TEST(!tr::write_whole_file(dir.path() / "recipe.yaml", "grpo:\n  seed: 1\n"));
  std::ifstream in(dir.path() / "recipe.yaml");
  std::stringstream s;
  s << in.rdbuf();
  BOOST_TEST(s.str() == "grpo:\n  seed: 1\n");
  BOOST_TEST(!fs::exists(dir.path() / "recipe.yaml.tmp"));
}

BOOST_AUTO_TEST_CASE(a_file_that_cannot_be_written_is_named_with_the_reason_and_leaves_nothing) {
  const temp_dir dir;
  const auto child = tandem::test::run_limited(RLIMIT_FSIZE, 10, [&] {
    auto e = tr::write_whole_file(dir.path() / "recipe.yaml", std::string(100, 'x'));
    return e ? e->message : std::string("written");
  });
  BOOST_TEST_REQUIRE(child.exited_cleanly, child.report);
  BOOST_TEST(child.report == "cannot write " + (dir.path() / "recipe.yaml").string() + ": File too large");
  BOOST_TEST(fs::is_empty(dir.path()));

  auto e = tr::write_whole_file(dir.path() / "missing" / "recipe.yaml", "x");
  BOOST_TEST_REQUIRE(e.has_value());
  BOOST_TEST(e->message == "cannot create " + (dir.path() / "missing" / "recipe.yaml.tmp").string() +
                               ": No such file or directory");
}

BOOST_AUTO_TEST_SUITE_END()
