// Strict conversion of YAML values to typed recipe values.
#include <boost/test/unit_test.hpp>

#include "orchestration/config/value_check.h"

using namespace tandem::config;

namespace {

key_spec spec_of(value_kind kind) {
  key_spec k;
  k.path = "a.b";
  k.kind = kind;
  return k;
}

/// The checked value, or the error message.
std::variant<config_value, std::string> check(const key_spec& k, const std::string& yaml) {
  config_errors errors;
  auto v = check_value(k, YAML::Load(yaml), source_location{"f.yaml", 1, 4, 0}, errors);
  if (v) return *v;
  return errors.at(0).to_string();
}

config_value ok(const key_spec& k, const std::string& yaml) {
  auto r = check(k, yaml);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<config_value>(r), yaml);
  return std::get<config_value>(r);
}

std::string bad(const key_spec& k, const std::string& yaml) {
  auto r = check(k, yaml);
  BOOST_REQUIRE_MESSAGE(std::holds_alternative<std::string>(r), yaml + " was accepted");
  return std::get<std::string>(r);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(value_check_test)

BOOST_AUTO_TEST_CASE(integers_are_plain_digits_only) {
  const auto k = spec_of(value_kind::integer);
  BOOST_TEST((ok(k, "42") == config_value{std::int64_t{42}}));
  BOOST_TEST((ok(k, "-7") == config_value{std::int64_t{-7}}));
  BOOST_TEST((ok(k, "+7") == config_value{std::int64_t{7}}));
  BOOST_TEST(bad(k, "2.0") == "f.yaml:1:4: error: a.b: expected an integer, got '2.0' (a floating-point number; write it out, e.g. 1000000)");
  BOOST_TEST(bad(k, "'3'") == "f.yaml:1:4: error: a.b: expected an integer, got the quoted string '3'");
  BOOST_TEST(bad(k, "0x10") == "f.yaml:1:4: error: a.b: expected an integer, got '0x10'");
  BOOST_TEST(bad(k, "[1]") == "f.yaml:1:4: error: a.b: expected an integer, got a list");
}

BOOST_AUTO_TEST_CASE(reals_accept_integer_text_and_exponents_but_not_infinity) {
  const auto k = spec_of(value_kind::real);
  BOOST_TEST((ok(k, "3") == config_value{3.0}));
  BOOST_TEST((ok(k, "1e-6") == config_value{1e-6}));
  BOOST_TEST((ok(k, ".5") == config_value{0.5}));
  BOOST_TEST(bad(k, ".inf") == "f.yaml:1:4: error: a.b: expected a number, got '.inf'");
  BOOST_TEST(bad(k, "1e999") == "f.yaml:1:4: error: a.b: number 1e999 is out of range");
}

BOOST_AUTO_TEST_CASE(booleans_are_true_or_false_not_yaml_1_1_words) {
  const auto k = spec_of(value_kind::boolean);
  BOOST_TEST((ok(k, "true") == config_value{true}));
  BOOST_TEST((ok(k, "False") == config_value{false}));
  BOOST_TEST(bad(k, "on") == "f.yaml:1:4: error: a.b: expected true or false, got 'on'");
  BOOST_TEST(bad(k, "1") == "f.yaml:1:4: error: a.b: expected true or false, got '1'");
}

BOOST_AUTO_TEST_CASE(null_is_refused_unless_the_key_is_nullable) {
  auto k = spec_of(value_kind::integer);
  BOOST_TEST(bad(k, "~") == "f.yaml:1:4: error: a.b: null is not allowed; expected an integer");
  k.nullable = true;
  BOOST_TEST((ok(k, "null") == config_value{std::monostate{}}));
}

BOOST_AUTO_TEST_CASE(bounds_are_inclusive_or_exclusive_as_declared) {
  auto k = spec_of(value_kind::real);
  k.min = 0;
  k.min_exclusive = true;
  k.max = 1;
  BOOST_TEST(bad(k, "0") == "f.yaml:1:4: error: a.b: must be > 0.0, got 0");
  BOOST_TEST((ok(k, "1") == config_value{1.0}));
  BOOST_TEST(bad(k, "1.01") == "f.yaml:1:4: error: a.b: must be <= 1.0, got 1.01");
}

BOOST_AUTO_TEST_CASE(lists_check_every_item_and_name_the_bad_one) {
  auto k = spec_of(value_kind::integer_list);
  k.min = 0;
  BOOST_TEST((ok(k, "[]") == config_value{std::vector<std::int64_t>{}}));
  BOOST_TEST((ok(k, "[1, 2]") == config_value{std::vector<std::int64_t>{1, 2}}));
  BOOST_TEST(bad(k, "[1, -2]") == "f.yaml:1:4: error: a.b: item 1: must be >= 0, got -2");
  BOOST_TEST(bad(k, "3") == "f.yaml:1:4: error: a.b: expected a list of integers, got '3'");
}

BOOST_AUTO_TEST_CASE(choices_suggest_the_nearest_valid_text) {
  auto k = spec_of(value_kind::choice);
  k.choices = {"none", "selective", "full"};
  BOOST_TEST((ok(k, "full") == config_value{std::string("full")}));
  BOOST_TEST(bad(k, "selectve") == "f.yaml:1:4: error: a.b: expected one of none, selective, full; got 'selectve' (did you mean 'selective'?)");
  BOOST_TEST(bad(k, "everything") == "f.yaml:1:4: error: a.b: expected one of none, selective, full; got 'everything'");
}

BOOST_AUTO_TEST_SUITE_END()
