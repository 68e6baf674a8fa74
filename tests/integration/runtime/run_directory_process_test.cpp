// `tandem run` and its run directory (logger.log_dir), as processes with the fake engines: a
// second run into one directory is refused naming --fresh and leaves the first run's files byte
// for byte; with --fresh it runs in <log_dir>.2 and says so; a log_dir that is a file, or lies
// under one, fails at the start naming it, before any member is spawned; a full disk (a file-size
// limit on the controller) fails the run naming the file and the reason, and every line of its
// records is still a whole JSON record.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_checks.hpp"

namespace fs = std::filesystem;
using namespace runtime_test;
using json = nlohmann::json;

namespace {

const std::vector<std::string> two_steps = {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1"};

/// Every regular file of `dir` by name, with its bytes.
std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().filename().string()] = read_text(e.path());
  return out;
}

/// The lines of `file` that are not one whole JSON object each ("" when every line is), and the
/// number of lines.
std::pair<std::string, std::size_t> broken_lines(const fs::path& file) {
  const std::string text = read_text(file);
  if (!text.empty() && text.back() != '\n') return {"the file ends inside a line", 0};
  std::string broken;
  std::size_t lines = 0, at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) broken += "line " + std::to_string(lines + 1) + ": " + line.substr(0, 80) + "\n";
    ++lines;
    at = end + 1;
  }
  return {broken, lines};
}

/// Root creates files in a read-only directory: such a case is skipped for root (reported so);
/// tests/unit/orchestration/records/run_files_test.cpp makes the creation fail under a descriptor
/// limit instead.
boost::test_tools::assertion_result not_root(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(::geteuid() != 0);
  r.message() << "skipped as root, who may write anywhere";
  return r;
}

/// The text before the first newline.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

BOOST_AUTO_TEST_SUITE(run_directory_process_test)

BOOST_AUTO_TEST_CASE(a_second_run_into_the_same_directory_is_refused_naming_fresh_and_leaves_the_first_runs_files_byte_for_byte) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "tiny";
  child_process first(run_args(colocated_recipe, logs, two_steps));
  BOOST_TEST_REQUIRE(first.exit_code(std::chrono::milliseconds(120000)) == 0, first.output());
  const auto before = files_of(logs);
  for (const char* name : {"recipe.yaml", "metrics.jsonl", "generations.jsonl", "controller.log", "metrics.png"})
    BOOST_TEST_REQUIRE(before.count(name) == 1u, name << " is missing from the run directory");
  BOOST_TEST_REQUIRE(fs::is_directory(logs / "final_weights"));
  BOOST_TEST(records(logs / "metrics.jsonl").size() == 2u);

  child_process second(run_args(colocated_recipe, logs, two_steps));
  BOOST_TEST(second.exit_code() == 1, second.output());
  BOOST_TEST(second.err().find("tandem run: " + logs.string() +
                               " holds the records of another run (recipe.yaml, metrics.jsonl, generations.jsonl, "
                               "controller.log, metrics.png, final_weights); pass --fresh to start this run in a new directory, or set "
                               "logger.log_dir\n") != std::string::npos,
             second.output());
  BOOST_TEST(second.out().find("spawned member") == std::string::npos, second.output());
  BOOST_TEST((files_of(logs) == before), "the refused run changed the first run's files");
  BOOST_TEST(!fs::exists(logs.string() + ".2"));
}

BOOST_AUTO_TEST_CASE(with_fresh_a_second_run_writes_to_the_first_free_sibling_and_says_so_in_its_first_line) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "tiny", sibling = logs.string() + ".2";
  std::vector<std::string> fresh = two_steps;
  fresh.push_back("--fresh");
  child_process first(run_args(colocated_recipe, logs, fresh));  // a free directory is used as is
  BOOST_TEST_REQUIRE(first.exit_code(std::chrono::milliseconds(120000)) == 0, first.output());
  // Off a terminal every line starts with its timestamp: the first line ends with what it says.
  BOOST_TEST(first_line(first.out()).ends_with(" run directory: " + logs.string()), first.output());
  const auto before = files_of(logs);

  child_process second(run_args(colocated_recipe, logs, fresh));
  BOOST_TEST_REQUIRE(second.exit_code(std::chrono::milliseconds(120000)) == 0, second.output());
  BOOST_TEST(first_line(second.out()).ends_with(" run directory: " + sibling.string() + " (" + logs.string() + " holds another run)"),
             second.output());
  BOOST_TEST(records(sibling / "metrics.jsonl").size() == 2u);
  BOOST_TEST(records(sibling / "generations.jsonl").size() == 2u * 16u);
  BOOST_TEST(read_text(sibling / "recipe.yaml").find("log_dir: " + sibling.string()) != std::string::npos);
  const std::string log = read_text(sibling / "controller.log");
  for (const std::string& line :
       std::vector<std::string>{"run directory: " + sibling.string(), "step 2/2: ", "tandem run: the run ended after "})
    BOOST_TEST(log.find(line) != std::string::npos, "controller.log lacks '" << line << "':\n" << log);
  BOOST_TEST((files_of(logs) == before), "the second run changed the first run's files");
}

BOOST_AUTO_TEST_CASE(a_log_dir_that_is_a_file_or_lies_under_one_fails_at_the_start_naming_it) {
  tandem::test::temp_dir dir;
  const std::string file = dir.write("taken", "not a directory");
  for (const fs::path& target : {fs::path(file), fs::path(file) / "run"}) {
    BOOST_TEST_CONTEXT(target) {
      child_process run(run_args(colocated_recipe, target, two_steps));
      BOOST_TEST(run.exit_code() == 1, run.output());
      BOOST_TEST(run.err().find("tandem run: " + file + ": not a directory\n") != std::string::npos, run.output());
      BOOST_TEST(run.out().find("spawned member") == std::string::npos, run.output());
    }
  }
  BOOST_TEST(read_text(file) == "not a directory");
}

BOOST_AUTO_TEST_CASE(a_run_directory_where_no_file_can_be_made_fails_at_the_start_naming_the_file_and_the_reason,
                     *boost::unit_test::precondition(not_root)) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "read-only";
  fs::create_directories(logs);
  fs::permissions(logs, fs::perms::owner_read | fs::perms::owner_exec);
  child_process run(run_args(colocated_recipe, logs, two_steps));
  const int code = run.exit_code();
  fs::permissions(logs, fs::perms::owner_all);
  BOOST_TEST(code == 1, run.output());
  BOOST_TEST(run.err().find("tandem run: cannot create " + (logs / "metrics.jsonl").string() + ": Permission denied\n") !=
                 std::string::npos,
             run.output());
  BOOST_TEST(run.out().find("spawned member") == std::string::npos, run.output());
}

BOOST_AUTO_TEST_CASE(a_full_disk_fails_the_run_naming_the_file_and_the_reason_and_every_record_written_is_whole) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "full";
  // 64 KiB per file: generations.jsonl fills up after a few steps, as on a full disk.
  child_process run(run_args(colocated_recipe, logs, {"grpo.max_num_steps=100000", "runtime.fake_weight_mb=1"}), {}, {},
                    child_limits{64 * 1024});
  const int code = run.exit_code(std::chrono::milliseconds(100000));
  BOOST_TEST_REQUIRE(code == 1, run.output());
  const std::regex failure("tandem run: failed: cannot write " + logs.string() +
                           "/(generations|metrics)\\.jsonl: File too large\n");
  BOOST_TEST(std::regex_search(run.err(), failure), run.output());
  std::map<std::string, std::size_t> lines;
  for (const char* name : {"metrics.jsonl", "generations.jsonl"}) {
    const auto [broken, count] = broken_lines(logs / name);
    BOOST_TEST(broken.empty(), name << " holds a partial record:\n" << broken);
    BOOST_TEST(fs::file_size(logs / name) <= 64u * 1024u);
    lines[name] = count;
  }
  BOOST_TEST(lines["metrics.jsonl"] >= 1u, run.output());
  // A step's metrics record follows all its trajectories.
  BOOST_TEST(lines["generations.jsonl"] >= 16u * lines["metrics.jsonl"]);
  BOOST_TEST(lines["generations.jsonl"] < 16u * (lines["metrics.jsonl"] + 1));
  BOOST_TEST(read_text(logs / "controller.log").find("tandem run: failed: cannot write ") != std::string::npos);
  for (const auto& [rank, pid] : member_pids(run.out()))
    BOOST_TEST(eventually([pid = pid] { return gone(pid); }), "member " << rank << " outlived the run");
}

BOOST_AUTO_TEST_SUITE_END()
