// printable(): outside text can neither end a log line nor drive a terminal, and what is
// harmless passes unchanged.
#include <boost/test/unit_test.hpp>

#include <string>

#include "gpu/core/printable.h"

using tandem::gpu::printable;

BOOST_AUTO_TEST_SUITE(printable_test)

BOOST_AUTO_TEST_CASE(line_breaks_and_control_characters_become_visible_escapes) {
  BOOST_TEST(printable("a\nb\rc\td") == "a\\nb\\rc\\td");
  BOOST_TEST(printable(std::string("x\0y", 3)) == "x\\x00y");
  BOOST_TEST(printable("\x1b[2J\x1b]0;title\x07") == "\\x1b[2J\\x1b]0;title\\x07");
  BOOST_TEST(printable("del\x7f") == "del\\x7f");
}

BOOST_AUTO_TEST_CASE(utf8_c1_controls_bidi_overrides_and_invalid_bytes_are_escaped_and_other_utf8_passes) {
  BOOST_TEST(printable("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");  // é, 日
  BOOST_TEST(printable("\xc2\x9b" "31m") == "\\u009b31m");                      // CSI as UTF-8
  BOOST_TEST(printable("a\xe2\x80\xae" "b") == "a\\u202eb");                    // right-to-left override
  BOOST_TEST(printable("line\xe2\x80\xa8" "sep") == "line\\u2028sep");
  BOOST_TEST(printable("\xff\xc0\x80") == "\\xff\\xc0\\x80");                   // invalid, overlong
  BOOST_TEST(printable("\xe6\x97") == "\\xe6\\x97");                            // truncated sequence
  BOOST_TEST(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");                   // a surrogate
}

BOOST_AUTO_TEST_CASE(escaping_twice_changes_nothing_more_and_long_text_is_cut_saying_how_much) {
  const std::string nasty = "host\n\x1b[31mtandem controller: the run ended\\n";
  BOOST_TEST(printable(printable(nasty)) == printable(nasty));
  BOOST_TEST(printable(std::string(10, 'a'), 4) == "aaaa...(6 more bytes)");
  BOOST_TEST(printable("plain text: 1 + 2 = 3 (ok)") == "plain text: 1 + 2 = 3 (ok)");
}

BOOST_AUTO_TEST_SUITE_END()
