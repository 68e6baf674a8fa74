// The metric-gate language: each function over a series, a value at a step, the five
// comparisons, exact messages for what does not parse, and a missing metric or step named.
#include <boost/test/unit_test.hpp>

#include <string>

#include "orchestration/records/metric_check.h"

namespace tr = tandem::records;

namespace {

const tr::metric_table table = {
    {"train/reward", {{1, -1.5}, {2, 0.25}, {3, 0.5}, {4, 0.75}}},
    {"train/token_mult_prob_error", {{1, 1.0}, {2, 1.0}, {3, 1.25}}},
    {"gen_kl_error", {{1, 0.000244140625}, {2, 0.00048828125}}},  // 2^-12, 2^-11: an exact mean
    {"odd name[x]", {{1, 7.0}}},
};

tr::check_outcome outcome(const std::string& text) {
  auto c = tr::parse_check(text);
  BOOST_TEST_REQUIRE(static_cast<bool>(c), (c ? std::string() : c.error().message));
  auto o = tr::evaluate(*c, table);
  BOOST_TEST_REQUIRE(static_cast<bool>(o), (o ? std::string() : o.error().message));
  return *o;
}

bool holds(const std::string& text) { return outcome(text).holds; }

std::string parse_error(const std::string& text) {
  auto c = tr::parse_check(text);
  BOOST_TEST_REQUIRE(!c, text << " parsed");
  BOOST_TEST((c.error().code == tr::metrics_errc::bad_expression));
  return c.error().message;
}

tr::metrics_error evaluation_error(const std::string& text) {
  auto c = tr::parse_check(text);
  BOOST_TEST_REQUIRE(static_cast<bool>(c), (c ? std::string() : c.error().message));
  auto o = tr::evaluate(*c, table);
  BOOST_TEST_REQUIRE(!o, text << " evaluated");
  return o.error();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metric_check_test)

BOOST_AUTO_TEST_CASE(each_function_reduces_every_step_of_its_metric) {
  BOOST_TEST(outcome("mean(train/reward) == 0").left == 0.0);
  BOOST_TEST(outcome("median(train/reward) == 0").left == 0.375);  // even count: the middle two
  BOOST_TEST(outcome("median(train/token_mult_prob_error) == 1").holds);
  BOOST_TEST(outcome("min(train/reward) == 0").left == -1.5);
  BOOST_TEST(outcome("max(train/reward) == 0").left == 0.75);
  BOOST_TEST(outcome("ratio_above(train/reward, 0.5) == 0").left == 0.5);  // >= counts
  BOOST_TEST(outcome("ratio_above(train/token_mult_prob_error, 1.05) == 0").left == 1.0 / 3.0);
}

BOOST_AUTO_TEST_CASE(a_step_index_reads_the_value_at_that_step) {
  BOOST_TEST(outcome("train/reward[2] == 0").left == 0.25);
  BOOST_TEST(holds("train/reward[1] > -1.6"));
  BOOST_TEST(!holds("train/reward[1] > -1.15"));
  BOOST_TEST(holds("\"odd name[x]\"[1] == 7"));
}

BOOST_AUTO_TEST_CASE(the_five_comparisons_compare_exactly) {
  BOOST_TEST(holds("mean(gen_kl_error) < 0.001"));
  BOOST_TEST(!holds("mean(gen_kl_error) < 0.0003662109375"));
  BOOST_TEST(holds("mean(gen_kl_error) <= 0.0003662109375"));
  BOOST_TEST(holds("max(train/reward) > 0.45"));
  BOOST_TEST(holds("max(train/reward) >= 0.75"));
  BOOST_TEST(!holds("max(train/reward) > 0.75"));
  BOOST_TEST(holds("min(train/token_mult_prob_error) == 1"));
  BOOST_TEST(!holds("max(train/token_mult_prob_error) == 1"));
}

BOOST_AUTO_TEST_CASE(either_side_may_be_a_metric_and_spaces_do_not_matter) {
  BOOST_TEST(holds("0.45 < max(train/reward)"));
  BOOST_TEST(holds("max(train/reward)>min(train/reward)"));
  BOOST_TEST(holds("  mean ( train/reward )  ==  0 "));
  BOOST_TEST(holds("train/reward [ 3 ]>=.5"));
}

BOOST_AUTO_TEST_CASE(a_check_is_written_back_normalized_with_the_values_it_compared) {
  auto c = tr::parse_check(" mean( train/reward)<  -1.15e0 ");
  BOOST_TEST_REQUIRE(static_cast<bool>(c));
  BOOST_TEST(c->text == "mean(train/reward) < -1.15e0");
  auto o = tr::evaluate(*c, table);
  BOOST_TEST_REQUIRE(static_cast<bool>(o));
  BOOST_TEST(o->values(*c) == "mean(train/reward) = 0");
  auto both = tr::parse_check("ratio_above(\"odd name[x]\",1)>=train/reward[3]");
  BOOST_TEST_REQUIRE(static_cast<bool>(both));
  BOOST_TEST(both->text == "ratio_above(\"odd name[x]\", 1) >= train/reward[3]");
  BOOST_TEST(tr::evaluate(*both, table)->values(*both) == "ratio_above(\"odd name[x]\", 1) = 1, train/reward[3] = 0.5");
}

BOOST_AUTO_TEST_CASE(what_does_not_parse_is_refused_naming_the_column_and_what_was_expected) {
  BOOST_TEST(parse_error("") == "'' at its end: expected a number, a metric with a step (train/reward[20]) or a function (mean, median, min, max, ratio_above)");
  BOOST_TEST(parse_error("mean(train/reward") == "'mean(train/reward' at its end: expected ')'");
  BOOST_TEST(parse_error("train/reward > 1") ==
             "'train/reward > 1' at column 14: expected '[' and a step after the metric train/reward (train/reward[20], or mean(train/reward), median, min, max)");
  BOOST_TEST(parse_error("train/reward[-1] > 1") == "'train/reward[-1] > 1' at column 14: expected a step (a whole number >= 0)");
  BOOST_TEST(parse_error("max(r) = 1") == "'max(r) = 1' at column 8: expected a comparison: <, <=, >, >= or ==");
  BOOST_TEST(parse_error("max(r) != 1") == "'max(r) != 1' at column 8: expected a comparison: <, <=, >, >= or ==");
  BOOST_TEST(parse_error("max(r) > 1 and") == "'max(r) > 1 and' at column 12: expected the end of the check after '1'");
  BOOST_TEST(parse_error("ratio_above(r) > 1") == "'ratio_above(r) > 1' at column 14: expected ','");
  BOOST_TEST(parse_error("ratio_above(r, x) > 1") == "'ratio_above(r, x) > 1' at column 16: expected a number (the threshold)");
  BOOST_TEST(parse_error("max(r) > -") == "'max(r) > -' at column 10: expected a number");
  BOOST_TEST(parse_error("\"r[1] > 1") == "'\"r[1] > 1' at column 1: expected a closing '\"'");
  BOOST_TEST(parse_error("max(1) > 1") == "'max(1) > 1' at column 5: expected a metric name");
  BOOST_TEST(parse_error("mean > 1") == "'mean > 1' at column 6: expected '(' after mean");
  BOOST_TEST(parse_error("train/reward[4] < 7.5e-1 + 0") == "'train/reward[4] < 7.5e-1 + 0' at column 26: expected the end of the check after '7.5e-1'");
}

BOOST_AUTO_TEST_CASE(a_missing_metric_is_an_error_naming_it_and_the_metrics_there_are) {
  const auto e = evaluation_error("mean(train/rewad) > 0");
  BOOST_TEST((e.code == tr::metrics_errc::missing_metric));
  BOOST_TEST(e.message == "no metric 'train/rewad' (metrics: gen_kl_error, odd name[x], train/reward, train/token_mult_prob_error)");
}

BOOST_AUTO_TEST_CASE(a_missing_step_is_an_error_naming_the_metric_the_step_and_the_steps_there_are) {
  const auto e = evaluation_error("1 < train/reward[20]");
  BOOST_TEST((e.code == tr::metrics_errc::missing_step));
  BOOST_TEST(e.message == "metric 'train/reward' has no step 20 (it has 4 steps, from 1 to 4)");
}

BOOST_AUTO_TEST_CASE(numbers_print_as_the_shortest_text_that_reads_back_the_same) {
  BOOST_TEST(tr::format_number(3.0) == "3");
  BOOST_TEST(tr::format_number(0.1) == "0.1");
  BOOST_TEST(tr::format_number(1.0000001) == "1.0000001");
  BOOST_TEST(tr::format_number(-1e-5) == "-1e-05");
}

BOOST_AUTO_TEST_SUITE_END()
