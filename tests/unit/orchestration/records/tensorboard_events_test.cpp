// A TensorBoard event file is TFRecords of hand-encoded Event protobufs: the CRC-32C is the
// Castagnoli one, each record is framed with masked CRCs of its length and data, the first event
// carries the file version, each step is one event holding every scalar, and a record that does
// not fit is cut off again with an error naming the path and the OS reason; a resumed run reopens
// its file cut back to a whole event after the opening one, and nowhere else. (That TensorBoard
// itself reads the files back: tests/python/tensorboard_events_test.py.)
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "orchestration/records/tensorboard_events.h"
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

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (const int c : b) s.push_back(static_cast<char>(c));
  return s;
}

std::uint64_t le(const std::string& s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

/// The data of each record of a file, every CRC checked (a bad one fails the test).
std::vector<std::string> records_of(const std::string& file) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < file.size()) {
    BOOST_TEST_REQUIRE(file.size() - at >= 16u, "a partial record at byte " << at);
    const std::uint64_t n = le(file, at, 8);
    BOOST_TEST_REQUIRE(le(file, at + 8, 4) == tr::masked_crc(tr::crc32c(file.substr(at, 8))));
    BOOST_TEST_REQUIRE(file.size() - at - 16 >= n);
    const std::string data = file.substr(at + 12, n);
    BOOST_TEST_REQUIRE(le(file, at + 12 + n, 4) == tr::masked_crc(tr::crc32c(data)));
    out.push_back(data);
    at += 16 + n;
  }
  return out;
}

/// The one file a directory holds.
std::filesystem::path only_file(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  BOOST_TEST_REQUIRE(files.size() == 1u);
  return files[0];
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tensorboard_events_test)

BOOST_AUTO_TEST_CASE(crc32c_is_the_castagnoli_crc_of_the_check_string) {
  BOOST_TEST(tr::crc32c("123456789") == 0xe3069283u);
  BOOST_TEST(tr::crc32c("") == 0u);
  BOOST_TEST(tr::crc32c(std::string(32, '\0')) == 0x8a9136aau);  // RFC 3720 B.4: 32 bytes of zeros
  BOOST_TEST(tr::crc32c(std::string(32, '\xff')) == 0x62a8ab43u);  // and of ones
}

BOOST_AUTO_TEST_CASE(a_crc_is_masked_by_rotating_it_right_15_bits_and_adding_the_constant) {
  BOOST_TEST(tr::masked_crc(0) == 0xa282ead8u);
  BOOST_TEST(tr::masked_crc(0xe3069283u) == ((0xe3069283u >> 15 | 0xe3069283u << 17) + 0xa282ead8u));
  BOOST_TEST(tr::masked_crc(0x00008000u) == 0xa282ead9u);  // bit 15 rotates to bit 0
}

BOOST_AUTO_TEST_CASE(a_record_is_its_length_the_masked_crc_of_the_length_the_data_and_the_masked_crc_of_the_data) {
  const std::string data = "123456789";
  const std::string r = tr::tfrecord(data);
  BOOST_TEST_REQUIRE(r.size() == 8 + 4 + data.size() + 4);
  BOOST_TEST(r.substr(0, 8) == bytes({9, 0, 0, 0, 0, 0, 0, 0}));
  BOOST_TEST(le(r, 8, 4) == tr::masked_crc(tr::crc32c(bytes({9, 0, 0, 0, 0, 0, 0, 0}))));
  BOOST_TEST(r.substr(12, 9) == data);
  BOOST_TEST(le(r, 21, 4) == tr::masked_crc(0xe3069283u));
  BOOST_TEST(tr::tfrecord("").size() == 16u);
}

BOOST_AUTO_TEST_CASE(the_first_event_holds_the_wall_time_and_the_file_version) {
  // field 1 (double, key 0x09) 1.5 little-endian; field 3 (string, key 0x1a) "brain.Event:2"
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x1a, 13}) + "brain.Event:2";
  BOOST_TEST(tr::file_version_event(1.5) == expected);
}

BOOST_AUTO_TEST_CASE(a_step_event_holds_its_step_and_one_simple_value_per_scalar_in_order) {
  // Value{tag "a" (0x0a), simple_value 1.0f (0x15)}; Summary{value (0x0a)}; Event{wall_time,
  // step (0x10, varint), summary (0x2a)}.
  const std::string value_a = bytes({0x0a, 1, 'a', 0x15, 0, 0, 0x80, 0x3f});
  const std::string value_b = bytes({0x0a, 3, 'x', '/', 'b', 0x15, 0, 0, 0, 0xc0});  // -2.0f
  const std::string summary = bytes({0x0a, 8}) + value_a + bytes({0x0a, 10}) + value_b;
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xac, 0x02, 0x2a, 22}) + summary;
  BOOST_TEST(tr::scalars_event(2.0, 300, {{"a", 1.0}, {"x/b", -2.0}}) == expected);
}

BOOST_AUTO_TEST_CASE(a_negative_step_is_a_ten_byte_varint_and_non_finite_values_are_written_as_they_are) {
  const std::string e = tr::scalars_event(0, -1, {{"n", std::numeric_limits<double>::quiet_NaN()},
                                                   {"i", std::numeric_limits<double>::infinity()},
                                                   {"big", 1e300}});
  BOOST_TEST(e.substr(9, 11) == bytes({0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  const auto float_at = [&](std::size_t at) {
    float f = 0;
    std::memcpy(&f, e.data() + at, 4);
    return f;
  };
  // summary key and length at 20, 21; then each value: key, length, tag key, length, tag, 0x15, float
  BOOST_TEST(std::isnan(float_at(22 + 2 + 2 + 1 + 1)));
  BOOST_TEST(float_at(22 + 10 + 2 + 2 + 1 + 1) == std::numeric_limits<float>::infinity());
  BOOST_TEST(float_at(22 + 20 + 2 + 2 + 3 + 1) == std::numeric_limits<float>::infinity());
}

BOOST_AUTO_TEST_CASE(a_file_is_named_for_its_time_and_host_and_holds_one_event_per_step_after_the_version) {
  const temp_dir dir;
  auto w = tr::tensorboard_events::open(dir.path(), 1700000000.25);
  BOOST_TEST_REQUIRE(static_cast<bool>(w), (w ? std::string() : w.error().message));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  BOOST_TEST((*w)->path() == dir.path() / ("events.out.tfevents.1700000000." + std::string(host)));
  BOOST_TEST(!(*w)->add_scalars(1, {{"loss", 0.5}}, 1700000001.0));
  BOOST_TEST(!(*w)->add_scalars(2, {{"loss", 0.25}, {"reward", 1.0}}, 1700000002.0));
  const std::string file = contents((*w)->path());
  BOOST_TEST(file.size() == (*w)->size());  // each add is in the file when it returns
  const auto records = records_of(file);
  BOOST_TEST_REQUIRE(records.size() == 3u);
  BOOST_TEST(records[0] == tr::file_version_event(1700000000.25));
  BOOST_TEST(records[1] == tr::scalars_event(1700000001.0, 1, {{"loss", 0.5}}));
  BOOST_TEST(records[2] == tr::scalars_event(1700000002.0, 2, {{"loss", 0.25}, {"reward", 1.0}}));
}

BOOST_AUTO_TEST_CASE(a_second_file_in_the_same_second_takes_the_next_free_name_and_leaves_the_first_alone) {
  const temp_dir dir;
  auto first = tr::tensorboard_events::open(dir.path(), 1700000000.0);
  BOOST_TEST_REQUIRE(static_cast<bool>(first));
  auto second = tr::tensorboard_events::open(dir.path(), 1700000000.0);
  BOOST_TEST_REQUIRE(static_cast<bool>(second));
  BOOST_TEST((*second)->path().string() == (*first)->path().string() + ".1");
  BOOST_TEST(records_of(contents((*first)->path())).size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_missing_directory_is_refused_naming_the_file_and_the_reason) {
  const temp_dir dir;
  auto w = tr::tensorboard_events::open(dir.path() / "missing", 1700000000.0);
  BOOST_TEST_REQUIRE(!w);
  BOOST_TEST((w.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(w.error().message.starts_with("cannot create " + (dir.path() / "missing").string() + "/events.out.tfevents.1700000000."));
  BOOST_TEST(w.error().message.ends_with(": No such file or directory"));
}

BOOST_AUTO_TEST_CASE(an_event_past_the_file_size_limit_is_cut_off_named_with_the_reason_and_ends_the_file) {
  const temp_dir dir;
  const std::vector<tr::tagged_scalar> scalars = {{std::string(40, 'm'), 1.0}};
  const std::size_t first = tr::tfrecord(tr::file_version_event(1.0)).size();
  const std::size_t each = tr::tfrecord(tr::scalars_event(1.0, 1, scalars)).size();
  const auto child = tandem::test::run_limited(RLIMIT_FSIZE, first + 2 * each + each / 2, [&] {
    auto w = tr::tensorboard_events::open(dir.path(), 1.0);
    if (!w) return "open: " + w.error().message;
    std::string report = "path " + (*w)->path().string() + "\n";
    for (int step = 1; step <= 3; ++step)
      if (auto e = (*w)->add_scalars(step, scalars, 1.0)) report += "step " + std::to_string(step) + ": " + e->message + "\n";
    report += "size " + std::to_string((*w)->size()) + "\n";
    rlimit l{};  // room again: a failed file still takes nothing
    ::getrlimit(RLIMIT_FSIZE, &l);
    l.rlim_cur = l.rlim_max;
    ::setrlimit(RLIMIT_FSIZE, &l);
    if (auto e = (*w)->add_scalars(4, scalars, 1.0)) report += "later: " + e->message + "\n";
    return report;
  });
  BOOST_TEST_REQUIRE(child.exited_cleanly, child.report);
  const auto path = only_file(dir.path());
  const std::string error = "cannot write " + path.string() + ": File too large";
  BOOST_TEST(child.report == "path " + path.string() + "\nstep 3: " + error + "\nsize " +
                                 std::to_string(first + 2 * each) + "\nlater: " + error + "\n");
  BOOST_TEST(records_of(contents(path)).size() == 3u, "a partial event remains");
}

/// An events file of the opening event and steps 1..3, closed; the sizes after each event.
std::vector<std::uint64_t> three_steps(const std::filesystem::path& dir, std::filesystem::path& path) {
  auto w = tr::tensorboard_events::open(dir, 1700000000.0);
  BOOST_TEST_REQUIRE(static_cast<bool>(w), (w ? std::string() : w.error().message));
  path = (*w)->path();
  std::vector<std::uint64_t> ends{(*w)->size()};
  for (int step = 1; step <= 3; ++step) {
    BOOST_TEST_REQUIRE(!(*w)->add_scalars(step, {{"loss", 1.0 / step}}, 1700000000.0 + step));
    ends.push_back((*w)->size());
  }
  return ends;
}

BOOST_AUTO_TEST_CASE(reopen_keeps_the_whole_events_before_the_size_and_appends_the_next_steps_after_them) {
  const temp_dir dir;
  std::filesystem::path path;
  const auto ends = three_steps(dir.path(), path);
  auto w = tr::tensorboard_events::reopen(path, ends[2]);  // the checkpoint after step 2
  BOOST_TEST_REQUIRE(static_cast<bool>(w), (w ? std::string() : w.error().message));
  BOOST_TEST((*w)->path() == path);
  BOOST_TEST((*w)->size() == ends[2]);
  BOOST_TEST(contents(path).size() == ends[2]);
  BOOST_TEST(!(*w)->add_scalars(3, {{"loss", 0.125}}, 1700000010.0));
  BOOST_TEST(contents(path).size() == (*w)->size());
  const auto records = records_of(contents(path));
  BOOST_TEST_REQUIRE(records.size() == 4u);
  BOOST_TEST(records[0] == tr::file_version_event(1700000000.0));
  BOOST_TEST(records[2] == tr::scalars_event(1700000002.0, 2, {{"loss", 0.5}}));
  BOOST_TEST(records[3] == tr::scalars_event(1700000010.0, 3, {{"loss", 0.125}}));
  // Keeping only the opening event, or every event, is a cut at an event's end too.
  BOOST_TEST(!tr::tensorboard_events::check_reopen(path, ends[0]));
  BOOST_TEST(!tr::tensorboard_events::check_reopen(path, (*w)->size()));
}

BOOST_AUTO_TEST_CASE(reopen_refuses_a_size_within_an_event_naming_the_path_and_the_event_and_leaves_the_file_unchanged) {
  const temp_dir dir;
  std::filesystem::path path;
  const auto ends = three_steps(dir.path(), path);
  const std::string before = contents(path);
  const std::uint64_t inside = ends[2] + 5;  // inside step 3's header
  const std::string error = path.string() + ": byte " + std::to_string(inside) +
                            " is not the end of an event (it falls within the event at byte " + std::to_string(ends[2]) + ")";
  auto w = tr::tensorboard_events::reopen(path, inside);
  BOOST_TEST_REQUIRE(!w);
  BOOST_TEST((w.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(w.error().message == error);
  const auto checked = tr::tensorboard_events::check_reopen(path, ends[3] - 1);  // one byte short of step 3's end
  BOOST_TEST_REQUIRE(static_cast<bool>(checked));
  BOOST_TEST(checked->message == path.string() + ": byte " + std::to_string(ends[3] - 1) +
                                     " is not the end of an event (it falls within the event at byte " + std::to_string(ends[2]) + ")");
  BOOST_TEST(contents(path) == before);
}

BOOST_AUTO_TEST_CASE(reopen_refuses_to_cut_into_the_opening_event) {
  const temp_dir dir;
  std::filesystem::path path;
  const auto ends = three_steps(dir.path(), path);
  const std::string before = contents(path);
  for (const std::uint64_t size : {std::uint64_t{0}, std::uint64_t{12}, ends[0] - 1}) {
    auto w = tr::tensorboard_events::reopen(path, size);
    BOOST_TEST_REQUIRE(!w);
    BOOST_TEST(w.error().message == path.string() + ": byte " + std::to_string(size) + " is within the opening event");
  }
  BOOST_TEST(contents(path) == before);
}

BOOST_AUTO_TEST_CASE(reopen_refuses_a_shorter_missing_or_damaged_file_naming_it) {
  const temp_dir dir;
  std::filesystem::path path;
  const auto ends = three_steps(dir.path(), path);
  const std::string before = contents(path);
  auto shorter = tr::tensorboard_events::reopen(path, ends[3] + 1);
  BOOST_TEST_REQUIRE(!shorter);
  BOOST_TEST(shorter.error().message == path.string() + " holds " + std::to_string(ends[3]) + " bytes, fewer than the " +
                                            std::to_string(ends[3] + 1) + " its checkpoint recorded");
  auto missing = tr::tensorboard_events::reopen(dir.path() / "events.out.tfevents.1.none", ends[1]);
  BOOST_TEST_REQUIRE(!missing);
  BOOST_TEST((missing.error().code == tr::file_errc::cannot_create));
  BOOST_TEST(missing.error().message ==
             "cannot reopen " + (dir.path() / "events.out.tfevents.1.none").string() + ": No such file or directory");
  BOOST_TEST(!std::filesystem::exists(dir.path() / "events.out.tfevents.1.none"));
  BOOST_TEST(contents(path) == before);
  // A length that its CRC does not vouch for is not walked past.
  std::string damaged = before;
  damaged[ends[1]] = static_cast<char>(damaged[ends[1]] ^ 0x01);
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged; }
  auto bad = tr::tensorboard_events::reopen(path, ends[3]);
  BOOST_TEST_REQUIRE(!bad);
  BOOST_TEST(bad.error().message == path.string() + ": the event at byte " + std::to_string(ends[1]) +
                                        " has a damaged length (its CRC does not match)");
  BOOST_TEST(contents(path) == damaged);
}

BOOST_AUTO_TEST_SUITE_END()
