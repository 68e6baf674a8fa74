// A record file takes whole lines only: each record is one line in the order appended; a record
// that does not fit (here: under a file-size limit, as on a full disk) is cut off again, the error
// names the path and the OS reason, and the file takes no more records; an existing file is never
// written, except by a resumed run reopening its own file, cut back to a record's end.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "orchestration/records/record_file.h"
#include "support/limited_child.h"
#include "support/temp_dir.h"

namespace tr = tandem::records;
using tandem::test::temp_dir;

namespace {

std::string contents(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(record_file_test)

BOOST_AUTO_TEST_CASE(each_record_is_one_whole_line_in_the_order_appended) {
  const temp_dir dir;
  auto f = tr::record_file::create(dir.path() / "metrics.jsonl");
  BOOST_TEST_REQUIRE(static_cast<bool>(f));
  for (const char* line : {R"({"step":1})", R"({"step":2})", R"({"step":3})"}) BOOST_TEST(!(*f)->append(line));
  BOOST_TEST(contents(dir.path() / "metrics.jsonl") == "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
  BOOST_TEST((*f)->size() == 33u);
  BOOST_TEST(!(*f)->failure());
}

BOOST_AUTO_TEST_CASE(a_file_that_exists_is_refused_naming_it_and_left_as_it_was) {
  const temp_dir dir;
  const std::string path = dir.write("metrics.jsonl", "{\"step\":1}\n");
  auto f = tr::record_file::create(path);
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST((f.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(f.error().message == "cannot create " + path + ": File exists");
  BOOST_TEST(contents(path) == "{\"step\":1}\n");
}

BOOST_AUTO_TEST_CASE(a_record_past_the_file_size_limit_is_cut_off_named_with_the_reason_and_ends_the_file) {
  const temp_dir dir;
  const auto path = dir.path() / "generations.jsonl";
  const std::string record(39, 'x');  // 40 bytes with its newline: two fit under 100, the third is cut
  const auto child = tandem::test::run_limited(RLIMIT_FSIZE, 100, [&] {
    auto f = tr::record_file::create(path);
    if (!f) return "create: " + f.error().message;
    std::string report;
    for (int i = 0; i < 3; ++i)
      if (auto e = (*f)->append(record)) report += "record " + std::to_string(i + 1) + ": " + e->message + "\n";
    report += "size " + std::to_string((*f)->size()) + "\n";
    rlimit l{};  // room again: a failed file still takes nothing
    ::getrlimit(RLIMIT_FSIZE, &l);
    l.rlim_cur = l.rlim_max;
    ::setrlimit(RLIMIT_FSIZE, &l);
    if (auto e = (*f)->append(record)) report += "later: " + e->message + "\n";
    return report;
  });
  BOOST_TEST_REQUIRE(child.exited_cleanly, child.report);
  const std::string error = "cannot write " + path.string() + ": File too large";
  BOOST_TEST(child.report == "record 3: " + error + "\nsize 80\nlater: " + error + "\n");
  BOOST_TEST(contents(path) == record + "\n" + record + "\n", "a partial record remains");
}

BOOST_AUTO_TEST_CASE(records_appended_from_several_threads_are_each_one_whole_line) {
  const temp_dir dir;
  auto f = tr::record_file::create(dir.path() / "controller.log");
  BOOST_TEST_REQUIRE(static_cast<bool>(f));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([file = *f, t] {
      for (int i = 0; i < 500; ++i) (void)file->append("thread " + std::to_string(t) + std::string(64, 'a' + t));
    });
  for (auto& t : threads) t.join();
  std::istringstream in(contents(dir.path() / "controller.log"));
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    BOOST_TEST_REQUIRE(line.size() == 72u, line);
    const char c = static_cast<char>('a' + (line[7] - '0'));
    BOOST_TEST_REQUIRE(line.substr(8) == std::string(64, c), line);
  }
  BOOST_TEST(lines == 2000);
}

BOOST_AUTO_TEST_CASE(reopen_cuts_the_file_back_to_the_checkpoints_size_and_appends_after_it) {
  const temp_dir dir;
  const std::string path = dir.write("metrics.jsonl", "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
  auto f = tr::record_file::reopen(path, 22);  // the first two records
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST(contents(path) == "{\"step\":1}\n{\"step\":2}\n");
  BOOST_TEST((*f)->size() == 22u);
  BOOST_TEST((*f)->path() == path);
  BOOST_TEST(!(*f)->append(R"({"step":3,"again":true})"));
  BOOST_TEST(contents(path) == "{\"step\":1}\n{\"step\":2}\n{\"step\":3,\"again\":true}\n");
  BOOST_TEST((*f)->size() == 46u);
  BOOST_TEST(!(*f)->failure());
}

BOOST_AUTO_TEST_CASE(reopen_at_size_zero_empties_the_file_and_at_its_whole_size_keeps_it) {
  const temp_dir dir;
  const std::string empty = dir.write("a.jsonl", "{\"step\":1}\n");
  auto f = tr::record_file::reopen(empty, 0);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST(contents(empty) == "");
  BOOST_TEST(!(*f)->append("x"));
  BOOST_TEST(contents(empty) == "x\n");
  const std::string whole = dir.write("b.jsonl", "{\"step\":1}\n");
  auto g = tr::record_file::reopen(whole, 11);
  BOOST_TEST_REQUIRE(static_cast<bool>(g), (g ? std::string() : g.error().message));
  BOOST_TEST(!(*g)->append("y"));
  BOOST_TEST(contents(whole) == "{\"step\":1}\ny\n");
}

BOOST_AUTO_TEST_CASE(reopen_refuses_a_file_shorter_than_the_checkpoints_size_naming_it_and_leaves_it_unchanged) {
  const temp_dir dir;
  const std::string path = dir.write("metrics.jsonl", "{\"step\":1}\n");
  const std::string error = path + " holds 11 bytes, fewer than the 33 its checkpoint recorded";
  auto f = tr::record_file::reopen(path, 33);
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST((f.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(f.error().message == error);
  const auto checked = tr::record_file::check_reopen(path, 33);
  BOOST_TEST_REQUIRE(static_cast<bool>(checked));
  BOOST_TEST(checked->message == error);
  BOOST_TEST(contents(path) == "{\"step\":1}\n");
}

BOOST_AUTO_TEST_CASE(reopen_refuses_a_size_that_is_not_the_end_of_a_record_naming_it_and_leaves_the_file_unchanged) {
  const temp_dir dir;
  const std::string text = "{\"step\":1}\n{\"step\":2}\n";
  const std::string path = dir.write("generations.jsonl", text);
  const std::string error = path + ": byte 15 is not the end of a record";
  auto f = tr::record_file::reopen(path, 15);  // inside the second record
  BOOST_TEST_REQUIRE(!f);
  BOOST_TEST((f.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(f.error().message == error);
  const auto checked = tr::record_file::check_reopen(path, 15);
  BOOST_TEST_REQUIRE(static_cast<bool>(checked));
  BOOST_TEST(checked->message == error);
  BOOST_TEST(!tr::record_file::check_reopen(path, 11));  // the end of the first record would do
  BOOST_TEST(contents(path) == text);
}

BOOST_AUTO_TEST_CASE(reopen_of_a_missing_file_fails_naming_it_and_creates_nothing) {
  const temp_dir dir;
  const auto path = dir.path() / "metrics.jsonl";
  for (const std::uint64_t size : {0u, 11u}) {
    auto f = tr::record_file::reopen(path, size);
    BOOST_TEST_REQUIRE(!f);
    BOOST_TEST((f.error().code == tr::file_errc::cannot_create));
    BOOST_TEST(f.error().message == "cannot reopen " + path.string() + ": No such file or directory");
  }
  BOOST_TEST(!std::filesystem::exists(path));
}

BOOST_AUTO_TEST_CASE(append_to_keeps_all_the_file_holds_and_appends_after_it) {
  const temp_dir dir;
  const std::string path = dir.write("controller.log", "first attempt\n");
  auto f = tr::record_file::append_to(path);
  BOOST_TEST_REQUIRE(static_cast<bool>(f), (f ? std::string() : f.error().message));
  BOOST_TEST((*f)->size() == 14u);
  BOOST_TEST(!(*f)->append("second attempt"));
  BOOST_TEST(contents(path) == "first attempt\nsecond attempt\n");
  auto missing = tr::record_file::append_to(dir.path() / "none.log");
  BOOST_TEST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message == "cannot reopen " + (dir.path() / "none.log").string() + ": No such file or directory");
  BOOST_TEST(!std::filesystem::exists(dir.path() / "none.log"));
}

BOOST_AUTO_TEST_SUITE_END()
