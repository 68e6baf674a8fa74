// The math environment's answer checkers (orchestration/environments/math_answer.h) on
// hand-worked cases of DAPO's definitions: the last "Answer:" line of the last 300 characters,
// normalised; the last balanced \boxed{} of the last 100, compared as given; and each step of
// normalize_final_answer.
#include "orchestration/environments/math_answer.h"

#include <boost/test/unit_test.hpp>
#include <string>

namespace te = tandem::environments;

BOOST_AUTO_TEST_SUITE(math_answer_test)

BOOST_AUTO_TEST_CASE(normalisation_keeps_what_follows_the_last_equals_sign_and_drops_units_and_markup) {
  BOOST_TEST(te::normalize_final_answer("x = 2y = 14") == "14");
  BOOST_TEST(te::normalize_final_answer("14 dollars") == "14");
  BOOST_TEST(te::normalize_final_answer("  1,000,000  ") == "1000000");
  BOOST_TEST(te::normalize_final_answer("1,000.5") == "1,000.5");  // not only digits and commas: commas stay
  BOOST_TEST(te::normalize_final_answer("$\\frac12$") == "\\frac{1}{2}");
  BOOST_TEST(te::normalize_final_answer("\\sqrt2") == "\\sqrt{2}");
  BOOST_TEST(te::normalize_final_answer("\\frac{1}{2}") == "\\frac{1}{2}");
  BOOST_TEST(te::normalize_final_answer("\\boxed{\\frac{3}{4}}") == "\\frac{3}{4}");  // greedy to the line's last brace
  BOOST_TEST(te::normalize_final_answer("\\text{(A)}") == "(A)");
  BOOST_TEST(te::normalize_final_answer("\\textbf{7}") == "7");
  BOOST_TEST(te::normalize_final_answer("90^\\circ") == "90");
  BOOST_TEST(te::normalize_final_answer("an apple and a pear") == "appleandpear");  // "an ", "a ", then spaces
  BOOST_TEST(te::normalize_final_answer("the answer is $5$ and $6$") == "5");  // the line's first $...$
  BOOST_TEST(te::normalize_final_answer("5\\text{ cm}") == "5");
  BOOST_TEST(te::normalize_final_answer("\xE2\x80\x83" "7\xC2\xA0") == "7");  // Unicode whitespace strips
}

BOOST_AUTO_TEST_CASE(the_answer_line_checker_takes_the_last_answer_of_the_last_300_characters) {
  auto v = te::check_answer_line("Let me think. 3 + 4 = 7.\nAnswer: 7", "7");
  BOOST_TEST(v.correct);
  BOOST_TEST(v.prediction == "7");
  v = te::check_answer_line("answer: 5\nno wait\nANSWER :  12", "12");  // any case, the last one
  BOOST_TEST(v.correct);
  v = te::check_answer_line("Answer: 12 apples", "12");  // "apples" is not one of the removed words
  BOOST_TEST(!v.correct);
  BOOST_TEST(v.prediction == "12apples");
  v = te::check_answer_line("Answer: 12\n" + std::string(300, '.'), "12");  // beyond the last 300 characters
  BOOST_TEST(!v.correct);
  BOOST_TEST(v.prediction == "[INVALID]");
  v = te::check_answer_line(std::string(280, '.') + "Answer: \xC3\xA9t\xC3\xA9", "\xC3\xA9t\xC3\xA9");  // characters, not bytes
  BOOST_TEST(v.correct);
  v = te::check_answer_line("Answer:\n\n42", "42");  // the whitespace after the colon may span lines
  BOOST_TEST(v.correct);
  v = te::check_answer_line("Answer:   ", "");  // the captured text may be whitespace alone; it strips to ""
  BOOST_TEST(v.correct);
  v = te::check_answer_line("Answer:\n", "x");  // nothing to capture on or after the line
  BOOST_TEST(v.prediction == "[INVALID]");
  v = te::check_answer_line("The answer is 7", "7");  // no colon: no answer line
  BOOST_TEST(!v.correct);
  v = te::check_answer_line("Answer: $\\boxed{1,234}$", "1234");
  BOOST_TEST(v.correct);
}

BOOST_AUTO_TEST_CASE(the_strict_boxed_checker_compares_the_last_balanced_box_of_the_last_100_characters_as_given) {
  auto v = te::check_strict_boxed("so \\boxed{2} then \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}");
  BOOST_TEST(v.correct);
  BOOST_TEST(v.prediction == "\\frac{1}{2}");
  v = te::check_strict_boxed("\\boxed{ 3}", "3");  // not normalised
  BOOST_TEST(!v.correct);
  v = te::check_strict_boxed("\\boxed{3" + std::string(10, 'x'), "3");  // never closes
  BOOST_TEST(v.prediction == "[INVALID]");
  v = te::check_strict_boxed("\\boxed{3}" + std::string(100, ' '), "3");  // outside the last 100 characters
  BOOST_TEST(!v.correct);
  BOOST_TEST(te::last_boxed("a \\boxed{x{y}z} b").value() == "\\boxed{x{y}z}");
  BOOST_TEST(!te::last_boxed("no box"));
}

BOOST_AUTO_TEST_SUITE_END()
