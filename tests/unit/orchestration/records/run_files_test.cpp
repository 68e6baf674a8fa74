// A run's files are created new in its directory at its start, which proves the directory
// writable: a directory where a file cannot be made fails naming the file and the OS reason
// (also for root, under a descriptor limit), and a failure part way leaves nothing of the attempt.
// A resumed run reopens its files cut back to its checkpoint's sizes, every size checked first:
// a refusal leaves every file as it was.
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

namespace {

/// A run's files with two steps of records, then one more written after its checkpoint; the
/// checkpoint's sizes, and the files closed.
tr::record_sizes run_past_a_checkpoint(const fs::path& dir, bool tensorboard) {
  auto f = tr::create_run_files(dir, true, "grpo:\n  seed: 1\n", tensorboard);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  const auto step = [&](int n) {
    BOOST_TEST_REQUIRE(!f->metrics->append("{\"step\":" + std::to_string(n) + "}"));
    BOOST_TEST_REQUIRE(!f->generations->append("{\"step\":" + std::to_string(n) + ",\"text\":\"a\"}"));
    BOOST_TEST_REQUIRE(!f->log->append("step " + std::to_string(n)));
    if (f->tensorboard) BOOST_TEST_REQUIRE(!f->tensorboard->add_scalars(n, {{"loss", 1.0}}, 1.0));
  };
  step(1);
  step(2);
  const tr::record_sizes at = tr::sizes_of(*f);
  step(3);
  return at;
}

}  // namespace

BOOST_AUTO_TEST_CASE(sizes_of_are_the_bytes_of_each_files_whole_records_and_the_events_files_name) {
  const temp_dir dir;
  auto f = tr::create_run_files(dir.path(), true, "x: 1\n", true);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST_REQUIRE(!f->metrics->append("{\"step\":1}"));
  const auto s = tr::sizes_of(*f);
  BOOST_TEST(s.metrics == 11u);
  BOOST_TEST(s.generations == 0u);
  BOOST_TEST(s.tensorboard_file == f->tensorboard->path().filename().string());
  BOOST_TEST(s.tensorboard == fs::file_size(f->tensorboard->path()));
  auto without = tr::create_run_files(dir.path() / "none", false, "x: 1\n");
  BOOST_TEST(!without);  // no such directory
  fs::create_directory(dir.path() / "none");
  without = tr::create_run_files(dir.path() / "none", false, "x: 1\n");
  BOOST_TEST_REQUIRE(static_cast<bool>(without));
  BOOST_TEST(tr::sizes_of(*without).tensorboard_file.empty());
}

BOOST_AUTO_TEST_CASE(a_resumed_run_cuts_its_records_back_to_the_checkpoint_keeps_the_log_growing_and_rewrites_the_recipe) {
  const temp_dir dir;
  const auto at = run_past_a_checkpoint(dir.path(), true);
  const std::string log_before = contents(dir.path() / "controller.log");
  auto f = tr::reopen_run_files(dir.path(), true, "grpo:\n  seed: 2\n", true, at);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST(f->directory == dir.path());
  BOOST_TEST_REQUIRE((f->metrics && f->generations && f->log && f->tensorboard));
  BOOST_TEST(contents(dir.path() / "metrics.jsonl") == "{\"step\":1}\n{\"step\":2}\n");
  BOOST_TEST(contents(dir.path() / "generations.jsonl") == "{\"step\":1,\"text\":\"a\"}\n{\"step\":2,\"text\":\"a\"}\n");
  BOOST_TEST(fs::file_size(dir.path() / at.tensorboard_file) == at.tensorboard);
  BOOST_TEST(contents(dir.path() / "controller.log") == log_before, "controller.log was cut");
  BOOST_TEST(contents(dir.path() / "recipe.yaml") == "grpo:\n  seed: 2\n");
  // The resumed run's records follow the last kept ones.
  BOOST_TEST(!f->metrics->append("{\"step\":3}"));
  BOOST_TEST(!f->generations->append("{\"step\":3,\"text\":\"b\"}"));
  BOOST_TEST(!f->log->append("resumed"));
  BOOST_TEST(!f->tensorboard->add_scalars(3, {{"loss", 0.5}}, 2.0));
  BOOST_TEST(contents(dir.path() / "metrics.jsonl") == "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
  BOOST_TEST(contents(dir.path() / "generations.jsonl") ==
             "{\"step\":1,\"text\":\"a\"}\n{\"step\":2,\"text\":\"a\"}\n{\"step\":3,\"text\":\"b\"}\n");
  BOOST_TEST(contents(dir.path() / "controller.log") == log_before + "resumed\n");
  BOOST_TEST(fs::file_size(dir.path() / at.tensorboard_file) == f->tensorboard->size());
  BOOST_TEST(tr::sizes_of(*f).metrics == 33u);
  BOOST_TEST(entries(dir.path()) == 5u, "a file was added or left behind");
  BOOST_TEST(!f->failure());
}

BOOST_AUTO_TEST_CASE(a_resume_where_one_file_is_shorter_than_its_checkpoint_is_refused_leaving_every_file_unchanged) {
  const temp_dir dir;
  auto at = run_past_a_checkpoint(dir.path(), true);
  at.generations = 1000;  // more than generations.jsonl holds
  std::vector<std::string> before;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir.path())) files.push_back(e.path());
  for (const auto& p : files) before.push_back(contents(p));
  auto f = tr::reopen_run_files(dir.path(), true, "changed: 1\n", true, at);
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST((f.error().code == tr::file_errc::cannot_create));
  const fs::path generations = dir.path() / "generations.jsonl";
  BOOST_TEST(f.error().message == generations.string() + " holds " + std::to_string(fs::file_size(generations)) +
                                      " bytes, fewer than the 1000 its checkpoint recorded");
  BOOST_TEST(entries(dir.path()) == files.size());
  for (std::size_t i = 0; i < files.size(); ++i) BOOST_TEST(contents(files[i]) == before[i], files[i].string() << " changed");
}

BOOST_AUTO_TEST_CASE(a_resume_where_a_later_file_does_not_end_at_its_checkpoints_size_cuts_no_earlier_file) {
  const temp_dir dir;
  for (const bool events : {false, true}) {
    const fs::path run = dir.path() / (events ? "events" : "generations");
    fs::create_directory(run);
    auto at = run_past_a_checkpoint(run, true);
    if (events) at.tensorboard -= 1;  // inside the last kept event: checked after both jsonl files
    else at.generations -= 1;         // inside the last kept generation: checked after metrics.jsonl
    const std::string metrics = contents(run / "metrics.jsonl");
    const std::string generations = contents(run / "generations.jsonl");
    const std::string tensorboard = contents(run / at.tensorboard_file);
    auto f = tr::reopen_run_files(run, true, "changed: 1\n", true, at);
    BOOST_TEST_REQUIRE(!f);
    BOOST_TEST(f.error().message.starts_with((events ? run / at.tensorboard_file : run / "generations.jsonl").string() + ": byte "));
    BOOST_TEST(contents(run / "metrics.jsonl") == metrics);
    BOOST_TEST(contents(run / "generations.jsonl") == generations);
    BOOST_TEST(contents(run / at.tensorboard_file) == tensorboard);
    BOOST_TEST(contents(run / "recipe.yaml") == "grpo:\n  seed: 1\n");
  }
}

BOOST_AUTO_TEST_CASE(a_missing_record_file_is_refused_naming_it) {
  const temp_dir dir;
  const auto at = run_past_a_checkpoint(dir.path(), false);
  fs::remove(dir.path() / "metrics.jsonl");
  auto f = tr::reopen_run_files(dir.path(), true, "x: 1\n", false, at);
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST(f.error().message == "cannot reopen " + (dir.path() / "metrics.jsonl").string() + ": No such file or directory");
  BOOST_TEST(!fs::exists(dir.path() / "metrics.jsonl"));
  BOOST_TEST(fs::file_size(dir.path() / "generations.jsonl") > at.generations, "generations.jsonl was cut");
}

BOOST_AUTO_TEST_CASE(a_resume_with_no_events_file_recorded_opens_a_new_one_and_a_missing_log_is_created) {
  const temp_dir dir;
  const auto at = run_past_a_checkpoint(dir.path(), false);  // the checkpoint's run had no tensorboard
  fs::remove(dir.path() / "controller.log");
  auto f = tr::reopen_run_files(dir.path(), true, "x: 1\n", true, at);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST_REQUIRE(static_cast<bool>(f->tensorboard));
  BOOST_TEST(f->tensorboard->path().parent_path() == dir.path());
  BOOST_TEST(f->tensorboard->path().filename().string().starts_with("events.out.tfevents."));
  BOOST_TEST(fs::file_size(dir.path() / "controller.log") == 0u);
  BOOST_TEST(entries(dir.path()) == 5u);
  // An events file recorded by name must be a file of the directory.
  auto outside = at;
  outside.tensorboard_file = "../events.out.tfevents.1.x";
  auto g = tr::reopen_run_files(dir.path(), true, "x: 1\n", true, outside);
  BOOST_TEST_REQUIRE(!g);
  BOOST_TEST(g.error().message.ends_with(": the checkpoint's events file is not a file of " + dir.path().string()));
}

BOOST_AUTO_TEST_CASE(a_resume_that_fails_after_its_checks_removes_the_files_it_made_and_cuts_nothing) {
  const temp_dir dir;
  const auto at = run_past_a_checkpoint(dir.path(), false);
  fs::remove(dir.path() / "controller.log");
  fs::remove(dir.path() / "recipe.yaml");
  fs::create_directories(dir.path() / "recipe.yaml" / "in-the-way");  // recipe.yaml cannot be replaced
  const std::string metrics = contents(dir.path() / "metrics.jsonl");
  auto f = tr::reopen_run_files(dir.path(), true, "x: 1\n", true, at);
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST((f.error().code == tr::file_errc::cannot_write));
  BOOST_TEST(f.error().message.starts_with("cannot write " + (dir.path() / "recipe.yaml").string() + ": "));
  BOOST_TEST(!fs::exists(dir.path() / "controller.log"), "the log this call created was left");
  BOOST_TEST(entries(dir.path()) == 3u, "a new events file or a temporary file was left");
  BOOST_TEST(contents(dir.path() / "metrics.jsonl") == metrics);
}

BOOST_AUTO_TEST_SUITE_END()
