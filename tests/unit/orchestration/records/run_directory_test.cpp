// A run's directory belongs to one run: a missing one is made with its parents; one that holds
// another run's records is refused naming them and --fresh; with --fresh the run moves to the
// first free sibling and the other run's directory is left as it was; a path that is, or lies
// under, something other than a directory is refused naming it.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "orchestration/records/run_directory.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tr = tandem::records;
using tandem::test::temp_dir;

BOOST_AUTO_TEST_SUITE(run_directory_test)

BOOST_AUTO_TEST_CASE(a_missing_directory_is_made_with_its_parents_and_chosen) {
  const temp_dir dir;
  const fs::path asked = dir.path() / "logs" / "tiny-cpu";
  auto d = tr::choose_run_directory(asked, false);
  BOOST_TEST_REQUIRE(static_cast<bool>(d), (d ? std::string() : d.error().message));
  BOOST_TEST(d->path == asked);
  BOOST_TEST(!d->moved());
  BOOST_TEST(fs::is_directory(asked));
}

BOOST_AUTO_TEST_CASE(a_directory_whose_files_are_not_a_runs_records_is_free) {
  const temp_dir dir;
  dir.write("run/notes.txt", "mine");
  dir.write("run/metrics.jsonl.old", "{}\n");
  auto d = tr::choose_run_directory(dir.path() / "run", false);
  BOOST_TEST_REQUIRE(static_cast<bool>(d), (d ? std::string() : d.error().message));
  BOOST_TEST(d->path == dir.path() / "run");
}

BOOST_AUTO_TEST_CASE(a_directory_that_holds_another_runs_records_is_refused_naming_them_and_fresh) {
  const temp_dir dir;
  dir.write("run/controller.log", "run directory: run\n");
  dir.write("run/metrics.jsonl", "{\"step\":1}\n");
  auto d = tr::choose_run_directory(dir.path() / "run", false);
  BOOST_TEST_REQUIRE(!d);
  BOOST_TEST((d.error().code == tr::file_errc::holds_another_run));
  BOOST_TEST(d.error().message == (dir.path() / "run").string() +
                                      " holds the records of another run (metrics.jsonl, controller.log); pass --fresh to "
                                      "start this run in a new directory, or set logger.log_dir");
  BOOST_TEST(!fs::exists(dir.path() / "run.2"));
}

BOOST_AUTO_TEST_CASE(each_record_name_alone_marks_a_directory_as_another_runs) {
  for (const auto& name : tr::run_record_names()) {
    BOOST_TEST_CONTEXT(name) {
      const temp_dir dir;
      dir.write("run/" + name, "");
      BOOST_TEST(tr::records_in(dir.path() / "run") == std::vector<std::string>{name});
      BOOST_TEST(!tr::choose_run_directory(dir.path() / "run", false));
    }
  }
}

BOOST_AUTO_TEST_CASE(with_fresh_a_directory_that_holds_a_run_moves_to_the_first_free_sibling) {
  const temp_dir dir;
  dir.write("run/recipe.yaml", "grpo: {}\n");
  dir.write("run.2/generations.jsonl", "{}\n");  // another run
  dir.write("run.3", "a file, not a directory");
  auto d = tr::choose_run_directory(dir.path() / "run", true);
  BOOST_TEST_REQUIRE(static_cast<bool>(d), (d ? std::string() : d.error().message));
  BOOST_TEST(d->path == dir.path() / "run.4");
  BOOST_TEST(d->asked == dir.path() / "run");
  BOOST_TEST(d->moved());
  BOOST_TEST(d->other_run == std::vector<std::string>{"recipe.yaml"});
  BOOST_TEST(fs::is_directory(dir.path() / "run.4"));
  BOOST_TEST(tr::records_in(dir.path() / "run") == std::vector<std::string>{"recipe.yaml"});
}

BOOST_AUTO_TEST_CASE(with_fresh_an_empty_sibling_is_free_and_a_free_directory_is_used_as_is) {
  const temp_dir dir;
  fs::create_directories(dir.path() / "free");
  auto d = tr::choose_run_directory(dir.path() / "free", true);
  BOOST_TEST_REQUIRE(static_cast<bool>(d), (d ? std::string() : d.error().message));
  BOOST_TEST(d->path == dir.path() / "free");
  BOOST_TEST(!d->moved());

  dir.write("run/metrics.jsonl", "");
  fs::create_directories(dir.path() / "run.2");
  d = tr::choose_run_directory(dir.path() / "run", true);
  BOOST_TEST_REQUIRE(static_cast<bool>(d), (d ? std::string() : d.error().message));
  BOOST_TEST(d->path == dir.path() / "run.2");
}

BOOST_AUTO_TEST_CASE(a_trailing_separator_names_the_same_directory_and_the_same_siblings) {
  const temp_dir dir;
  dir.write("run/metrics.jsonl", "");
  auto d = tr::choose_run_directory(dir.path().string() + "/run/", true);
  BOOST_TEST_REQUIRE(static_cast<bool>(d), (d ? std::string() : d.error().message));
  BOOST_TEST(d->asked == dir.path() / "run");
  BOOST_TEST(d->path == dir.path() / "run.2");
}

BOOST_AUTO_TEST_CASE(a_log_dir_that_is_a_file_is_refused_naming_it) {
  const temp_dir dir;
  const std::string file = dir.write("run", "not a directory");
  for (const bool fresh : {false, true}) {
    auto d = tr::choose_run_directory(file, fresh);
    BOOST_TEST_REQUIRE(!d);
    BOOST_TEST((d.error().code == tr::file_errc::not_a_directory));
    BOOST_TEST(d.error().message == file + ": not a directory");
  }
}

BOOST_AUTO_TEST_CASE(a_log_dir_under_a_file_is_refused_naming_that_file) {
  const temp_dir dir;
  const std::string file = dir.write("logs", "not a directory");
  auto d = tr::choose_run_directory(dir.path() / "logs" / "tiny-cpu" / "deeper", false);
  BOOST_TEST_REQUIRE(!d);
  BOOST_TEST((d.error().code == tr::file_errc::not_a_directory));
  BOOST_TEST(d.error().message == file + ": not a directory");
}

BOOST_AUTO_TEST_CASE(an_empty_log_dir_is_refused_saying_what_it_names) {
  auto d = tr::choose_run_directory("", false);
  BOOST_TEST_REQUIRE(!d);
  BOOST_TEST(d.error().message == "logger.log_dir is empty: it names the run's directory");
}

BOOST_AUTO_TEST_SUITE_END()
