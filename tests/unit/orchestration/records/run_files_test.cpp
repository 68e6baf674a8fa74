// A run's files are created new in its directory at its start, which proves the directory
// writable: a directory where a file cannot be made fails naming the file and the OS reason
// (also for root, under a descriptor limit), and a failure part way leaves nothing of the attempt.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "orchestration/records/run_directory.h"
#include "orchestration/records/run_files.h"
#include "support/limited_child.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tr = tandem::records;
using tandem::test::temp_dir;

namespace {

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t entries(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

/// Root creates files in a read-only directory: such a case is skipped for root (reported so).
boost::test_tools::assertion_result not_root(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(::geteuid() != 0);
  r.message() << "skipped as root, who may write anywhere; the descriptor-limit case covers the failure";
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_files_test)

BOOST_AUTO_TEST_CASE(a_runs_files_are_created_empty_and_its_recipe_written_whole) {
  const temp_dir dir;
  auto f = tr::create_run_files(dir.path(), true, "grpo:\n  seed: 42\n");
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST(f->directory == dir.path());
  BOOST_TEST_REQUIRE((f->metrics && f->generations && f->log));
  BOOST_TEST(contents(dir.path() / "recipe.yaml") == "grpo:\n  seed: 42\n");
  for (const char* name : {"metrics.jsonl", "generations.jsonl", "controller.log"})
    BOOST_TEST(fs::file_size(dir.path() / name) == 0u, name);
  BOOST_TEST(entries(dir.path()) == 4u, "a temporary file was left behind");
  // The end of a run adds metrics.png and final_weights, the rest of run_record_names().
  BOOST_TEST(tr::records_in(dir.path()) ==
                 (std::vector<std::string>{"recipe.yaml", "metrics.jsonl", "generations.jsonl", "controller.log"}),
             boost::test_tools::per_element());
  BOOST_TEST(!f->failure());
}

BOOST_AUTO_TEST_CASE(with_tensorboard_the_run_files_hold_one_events_file) {
  const temp_dir dir;
  auto f = tr::create_run_files(dir.path(), true, "x: 1\n", true);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST_REQUIRE(static_cast<bool>(f->tensorboard));
  BOOST_TEST(f->tensorboard->path().parent_path() == dir.path());
  BOOST_TEST(f->tensorboard->path().filename().string().starts_with("events.out.tfevents."));
  BOOST_TEST(entries(dir.path()) == 5u);
  BOOST_TEST(!f->failure());
  auto without = tr::create_run_files(dir.path() / "none", true, "x: 1\n", false);
  BOOST_TEST(!without);  // the directory does not exist; and a run without tensorboard makes no events
  fs::create_directory(dir.path() / "none");
  without = tr::create_run_files(dir.path() / "none", true, "x: 1\n", false);
  BOOST_TEST_REQUIRE(static_cast<bool>(without));
  BOOST_TEST(!without->tensorboard);
  BOOST_TEST(entries(dir.path() / "none") == 4u);
}

BOOST_AUTO_TEST_CASE(without_jsonl_only_the_log_and_the_recipe_are_made) {
  const temp_dir dir;
  auto f = tr::create_run_files(dir.path(), false, "x: 1\n");
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST(!f->metrics);
  BOOST_TEST(!f->generations);
  BOOST_TEST(tr::records_in(dir.path()) == (std::vector<std::string>{"recipe.yaml", "controller.log"}));
}

BOOST_AUTO_TEST_CASE(a_read_only_directory_fails_naming_the_first_file_and_the_os_reason,
                     *boost::unit_test::precondition(not_root)) {
  const temp_dir dir;
  fs::create_directories(dir.path() / "ro");
  fs::permissions(dir.path() / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  auto f = tr::create_run_files(dir.path() / "ro", true, "x: 1\n");
  fs::permissions(dir.path() / "ro", fs::perms::owner_all);
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST((f.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(f.error().message == "cannot create " + (dir.path() / "ro" / "metrics.jsonl").string() + ": Permission denied");
}

BOOST_AUTO_TEST_CASE(a_file_that_cannot_be_opened_fails_naming_it_and_the_os_reason_even_for_root) {
  const temp_dir dir;
  // With no descriptor to spare every open fails (EMFILE), whoever runs the test.
  const auto child = tandem::test::run_limited(RLIMIT_NOFILE, 3, [&] {
    auto f = tr::create_run_files(dir.path(), true, "x: 1\n");
    return f ? std::string("created") : f.error().message;
  });
  BOOST_TEST_REQUIRE(child.exited_cleanly, child.report);
  BOOST_TEST(child.report == "cannot create " + (dir.path() / "metrics.jsonl").string() + ": Too many open files");
  BOOST_TEST(entries(dir.path()) == 0u);
}

BOOST_AUTO_TEST_CASE(a_failure_part_way_removes_the_files_this_attempt_made) {
  const temp_dir dir;
  fs::create_directories(dir.path() / "controller.log");  // in the way of the third file
  auto f = tr::create_run_files(dir.path(), true, "x: 1\n");
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST(f.error().message == "cannot create " + (dir.path() / "controller.log").string() + ": File exists");
  BOOST_TEST(!fs::exists(dir.path() / "metrics.jsonl"));
  BOOST_TEST(!fs::exists(dir.path() / "generations.jsonl"));
  BOOST_TEST(!fs::exists(dir.path() / "recipe.yaml"));
  BOOST_TEST(fs::is_directory(dir.path() / "controller.log"));
}

BOOST_AUTO_TEST_CASE(a_failed_record_file_is_the_failure_of_the_run_files) {
  const temp_dir dir;
  auto f = tr::create_run_files(dir.path(), true, "x: 1\n");
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  const std::string record(99, 'x');
  const auto child = tandem::test::run_limited(RLIMIT_FSIZE, 150, [&] {
    (void)f->generations->append(record);
    (void)f->generations->append(record);
    const auto e = f->failure();
    return e ? e->message : std::string("no failure");
  });
  BOOST_TEST_REQUIRE(child.exited_cleanly, child.report);
  BOOST_TEST(child.report == "cannot write " + (dir.path() / "generations.jsonl").string() + ": File too large");
  BOOST_TEST(fs::file_size(dir.path() / "generations.jsonl") == 100u);
}

BOOST_AUTO_TEST_SUITE_END()
