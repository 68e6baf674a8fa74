// The timestamp of a log line (tools/cli/log_timestamp.h): ISO 8601, UTC, milliseconds, 'Z'.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <regex>
#include <string>

#include "tools/cli/log_timestamp.h"

namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

/// 2026-12-02T01:02:03.456Z: 20789 days after the epoch, then 1 h 2 min 3.456 s.
system_clock::time_point an_instant() {
  return system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(
      milliseconds(((20789LL * 24 + 1) * 60 + 2) * 60 * 1000 + 3456)));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_log_timestamp)

BOOST_AUTO_TEST_CASE(an_instant_is_written_in_utc_with_milliseconds_and_a_z) {
  BOOST_TEST(tandem::cli::log_timestamp(an_instant()) == "2026-12-02T01:02:03.456Z");
}

BOOST_AUTO_TEST_CASE(the_epoch_and_a_whole_second_keep_three_digits_of_milliseconds) {
  BOOST_TEST(tandem::cli::log_timestamp(system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
  BOOST_TEST(tandem::cli::log_timestamp(system_clock::time_point{} + milliseconds(61007)) == "1970-01-01T00:01:01.007Z");
}

BOOST_AUTO_TEST_CASE(milliseconds_are_truncated_not_rounded) {
  const auto t = an_instant() + std::chrono::microseconds(999);
  BOOST_TEST(tandem::cli::log_timestamp(t) == "2026-12-02T01:02:03.456Z");
}

BOOST_AUTO_TEST_CASE(a_timestamped_line_is_the_timestamp_a_space_and_the_line) {
  BOOST_TEST(tandem::cli::timestamped(an_instant(), "all 4 members joined") == "2026-12-02T01:02:03.456Z all 4 members joined");
  const std::regex form(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z x)");
  BOOST_TEST(std::regex_match(tandem::cli::timestamped(system_clock::now(), "x"), form));
}

BOOST_AUTO_TEST_SUITE_END()
