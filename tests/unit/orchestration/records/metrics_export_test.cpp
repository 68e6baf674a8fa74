// A run's metrics.jsonl read back: nested fields become '/'-joined series, non-numbers are
// skipped, a broken line is an error naming file:line, and the NeMo-RL form maps each metric to
// its values under string step keys in step order.
#include <boost/test/unit_test.hpp>

#include <string>

#include "orchestration/records/metrics_export.h"
#include "support/temp_dir.h"

namespace tr = tandem::records;
using tandem::test::temp_dir;

namespace {

tr::metric_table parsed(const std::string& text) {
  auto t = tr::parse_metrics(text, "m.jsonl");
  BOOST_TEST_REQUIRE(static_cast<bool>(t), (t ? std::string() : t.error().message));
  return *t;
}

/// The error parsing `text` must give.
tr::metrics_error refused(const std::string& text) {
  auto t = tr::parse_metrics(text, "m.jsonl");
  BOOST_TEST_REQUIRE(!t);
  return t.error();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(metrics_export_test)

BOOST_AUTO_TEST_CASE(nested_fields_are_series_named_by_their_path_and_names_with_slashes_are_kept) {
  const auto t = parsed(R"({"step":1,"loss":0.5,"refit":{"bytes":123,"inner":{"n":2}},"train/reward":-1.25})"
                        "\n"
                        R"({"step":2,"loss":0.25,"refit":{"bytes":124,"inner":{"n":3}},"train/reward":0.5})"
                        "\n");
  BOOST_TEST(tr::metric_names(t) == "loss, refit/bytes, refit/inner/n, train/reward");
  BOOST_TEST((t.at("loss") == tr::metric_series{{1, 0.5}, {2, 0.25}}));
  BOOST_TEST((t.at("refit/inner/n") == tr::metric_series{{1, 2.0}, {2, 3.0}}));
  BOOST_TEST((t.at("train/reward") == tr::metric_series{{1, -1.25}, {2, 0.5}}));
  BOOST_TEST(!t.count("step"));
}

BOOST_AUTO_TEST_CASE(strings_booleans_arrays_and_null_are_skipped_and_a_step_may_lack_a_metric) {
  const auto t = parsed(R"({"step":1,"mode":"colocated","ok":true,"digests":["0x1"],"loss":null,"r":1})"
                        "\n\n  \n"
                        R"({"step":3,"r":2,"loss":0.1,"refit":{"mode":"x","checksums":false}})");
  BOOST_TEST(tr::metric_names(t) == "loss, r");
  BOOST_TEST((t.at("loss") == tr::metric_series{{3, 0.1}}));
  BOOST_TEST((t.at("r") == tr::metric_series{{1, 1.0}, {3, 2.0}}));
}

BOOST_AUTO_TEST_CASE(a_line_that_is_not_json_is_an_error_naming_the_file_and_line) {
  const auto e = refused("{\"step\":1,\"r\":1}\n{\"step\":2,\"r\":\n");
  BOOST_TEST((e.code == tr::metrics_errc::malformed_record));
  BOOST_TEST(e.message.starts_with("m.jsonl:2: not JSON: "), e.message);
}

BOOST_AUTO_TEST_CASE(a_record_without_a_whole_step_of_at_least_one_is_an_error_naming_the_line) {
  BOOST_TEST(refused("[1,2]\n").message == "m.jsonl:1: a record is a JSON object, not an array");
  BOOST_TEST(refused("{\"step\":1}\n{\"r\":1}\n").message == "m.jsonl:2: no \"step\" (a whole number >= 0)");
  BOOST_TEST(refused("{\"step\":1.5}").message == "m.jsonl:1: \"step\" is 1.5, not a whole number >= 0");
  BOOST_TEST(refused("{\"step\":-1}").message == "m.jsonl:1: \"step\" is -1, not a whole number >= 0");
  BOOST_TEST(refused("{\"step\":\"3\"}").message == "m.jsonl:1: \"step\" is \"3\", not a whole number >= 0");
}

BOOST_AUTO_TEST_CASE(a_step_given_twice_is_an_error_naming_both_lines) {
  const auto e = refused("{\"step\":1}\n{\"step\":2}\n{\"step\":1}\n");
  BOOST_TEST((e.code == tr::metrics_errc::duplicate_step));
  BOOST_TEST(e.message == "m.jsonl:3: step 1 again (first at line 1; two runs in one file?)");
}

BOOST_AUTO_TEST_CASE(a_name_given_both_flat_and_nested_in_one_record_is_an_error) {
  const auto e = refused(R"({"step":1,"a/b":1,"a":{"b":2}})");
  BOOST_TEST((e.code == tr::metrics_errc::duplicate_metric));
  BOOST_TEST(e.message.starts_with("m.jsonl:1: metric 'a/b' twice in one record"), e.message);
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_an_error_naming_it_with_the_reason) {
  const temp_dir dir;
  auto t = tr::read_metrics(dir.path() / "metrics.jsonl");
  BOOST_TEST_REQUIRE(!t);
  BOOST_TEST((t.error().code == tr::metrics_errc::cannot_read));
  BOOST_TEST(t.error().message == "cannot read " + (dir.path() / "metrics.jsonl").string() + ": No such file or directory");
}

BOOST_AUTO_TEST_CASE(a_run_directory_names_its_metrics_file_and_a_file_names_itself) {
  const temp_dir dir;
  const std::string file = dir.write("other.jsonl", "{\"step\":1,\"r\":2}\n");
  BOOST_TEST(tr::metrics_file_of(dir.path()) == dir.path() / "metrics.jsonl");
  BOOST_TEST(tr::metrics_file_of(file) == file);
  auto t = tr::read_metrics(file);
  BOOST_TEST_REQUIRE(static_cast<bool>(t));
  BOOST_TEST((t->at("r") == tr::metric_series{{1, 2.0}}));
}

BOOST_AUTO_TEST_CASE(the_nemo_rl_form_maps_each_metric_to_string_steps_in_step_order) {
  const auto t = parsed("{\"step\":10,\"loss\":0.5}\n{\"step\":2,\"loss\":0.25,\"x\":{\"y\":3}}\n{\"step\":1,\"loss\":1}\n");
  BOOST_TEST(tr::nemo_rl_json(t, -1) == R"({"loss":{"1":1.0,"2":0.25,"10":0.5},"x/y":{"2":3.0}})");
  BOOST_TEST(tr::nemo_rl_json({}, -1) == "{}");
}

BOOST_AUTO_TEST_CASE(values_by_step_gathers_each_steps_metrics_in_name_order) {
  const auto t = parsed("{\"step\":1,\"b\":1,\"a\":2}\n{\"step\":2,\"b\":3}\n");
  const auto steps = tr::values_by_step(t);
  BOOST_TEST_REQUIRE(steps.size() == 2u);
  BOOST_TEST((steps.at(1) == std::vector<std::pair<std::string, double>>{{"a", 2.0}, {"b", 1.0}}));
  BOOST_TEST((steps.at(2) == std::vector<std::pair<std::string, double>>{{"b", 3.0}}));
}

BOOST_AUTO_TEST_SUITE_END()
