// `tandem metrics export|check|tensorboard` and `tandem plot` on a small run directory
// (tools/cli/metrics_command.cpp, plot_command.cpp): the NeMo-RL JSON they export, the exit codes
// of checks that hold and fail, an events file per conversion, a PNG per plot, and one clear
// error naming what was wrong for each bad input.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
using tandem::test::cli;
using tandem::test::cli_result;
using tandem::test::temp_dir;

namespace {

// Three steps as a run writes them: nested objects, names with '/', strings and booleans.
const std::string metrics_text =
    R"({"step":1,"train/loss":0.5,"train/reward":-1.5,"train/token_mult_prob_error":1,"refit":{"bytes":100,"mode":"colocated"},"ok":true})"
    "\n"
    R"({"step":2,"train/loss":0.25,"train/reward":0.25,"train/token_mult_prob_error":1,"refit":{"bytes":200,"mode":"colocated"},"ok":true})"
    "\n"
    R"({"step":3,"train/loss":0.125,"train/reward":0.5,"train/token_mult_prob_error":1.25,"refit":{"bytes":300,"mode":"colocated"},"ok":false})"
    "\n";

const std::string exported =
    R"({"refit/bytes":{"1":100.0,"2":200.0,"3":300.0},"train/loss":{"1":0.5,"2":0.25,"3":0.125},)"
    R"("train/reward":{"1":-1.5,"2":0.25,"3":0.5},"train/token_mult_prob_error":{"1":1.0,"2":1.0,"3":1.25}})";

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The JSON without its indentation and newlines (the commands indent it).
std::string compact(const std::string& text) {
  std::string s;
  bool in_string = false;
  for (const char c : text) {
    if (c == '"') in_string = !in_string;
    if (in_string || (c != ' ' && c != '\n')) s += c;
  }
  return s;
}

std::vector<fs::path> events_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) out.push_back(e.path());
  return out;
}

/// Runs the CLI with PATH set to `path`, then restores it.
cli_result with_path(const std::string& path, const std::vector<std::string>& a) {
  const char* old = std::getenv("PATH");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("PATH", path.c_str(), 1);
  cli_result r = cli(a);
  if (saved) ::setenv("PATH", saved->c_str(), 1);
  else ::unsetenv("PATH");
  return r;
}

struct run_fixture {
  temp_dir dir;
  std::string run = (dir.path() / "run").string();
  run_fixture() { dir.write("run/metrics.jsonl", metrics_text); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cli_metrics, run_fixture)

BOOST_AUTO_TEST_CASE(export_prints_every_numeric_metric_by_step_in_nemo_rl_form) {
  const cli_result r = cli({"metrics", "export", run});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(compact(r.out) == exported);
  BOOST_TEST(r.out.ends_with("}\n"));
  BOOST_TEST(r.err.empty());
}

BOOST_AUTO_TEST_CASE(export_with_o_writes_the_same_json_to_the_file) {
  const std::string file = (dir.path() / "metrics.json").string();
  const cli_result r = cli({"metrics", "export", run, "-o", file});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(r.out == "wrote 4 metrics over 3 steps to " + file + "\n");
  BOOST_TEST(compact(contents(file)) == exported);
  BOOST_TEST(!fs::exists(file + ".tmp"));
}

BOOST_AUTO_TEST_CASE(a_metrics_file_may_be_named_instead_of_its_run_directory) {
  const cli_result r = cli({"metrics", "export", run + "/metrics.jsonl"});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(compact(r.out) == exported);
  BOOST_TEST(r.out.ends_with("}\n"));
}

BOOST_AUTO_TEST_CASE(a_run_directory_without_metrics_is_refused_naming_the_file) {
  const std::string empty = (dir.path() / "empty").string();
  fs::create_directories(empty);
  for (const std::string sub : {"export", "tensorboard"}) {
    const cli_result r = cli({"metrics", sub, empty});
    BOOST_TEST(r.code == 1);
    BOOST_TEST(r.err == "tandem metrics " + sub + ": cannot read " + empty + "/metrics.jsonl: No such file or directory\n");
  }
  const cli_result c = cli({"metrics", "check", empty, "max(r) > 0"});
  BOOST_TEST(c.code == 1);
  BOOST_TEST(c.err == "tandem metrics check: cannot read " + empty + "/metrics.jsonl: No such file or directory\n");
  const cli_result p = cli({"plot", empty});
  BOOST_TEST(p.code == 1);
  BOOST_TEST(p.err == "tandem plot: cannot read " + empty + "/metrics.jsonl: No such file or directory\n");
}

BOOST_AUTO_TEST_CASE(a_malformed_line_is_refused_naming_the_file_and_line) {
  dir.write("bad/metrics.jsonl", "{\"step\":1,\"r\":1}\n{\"r\":2}\n");
  const cli_result r = cli({"metrics", "export", (dir.path() / "bad").string()});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err == "tandem metrics export: " + (dir.path() / "bad/metrics.jsonl").string() +
                          ":2: no \"step\" (a whole number >= 0)\n");
  BOOST_TEST(r.out.empty());
}

BOOST_AUTO_TEST_CASE(check_exits_0_when_every_expression_holds_and_prints_each_value) {
  const cli_result r = cli({"metrics", "check", run, "median(train/token_mult_prob_error) == 1", "train/reward[3] > -1.15",
                            "max(train/reward)>0.45", "ratio_above(train/token_mult_prob_error, 1.05) < 0.5"});
  BOOST_TEST_REQUIRE(r.code == 0, r.out + r.err);
  BOOST_TEST(r.out ==
             "ok     median(train/token_mult_prob_error) == 1 (median(train/token_mult_prob_error) = 1)\n"
             "ok     train/reward[3] > -1.15 (train/reward[3] = 0.5)\n"
             "ok     max(train/reward) > 0.45 (max(train/reward) = 0.5)\n"
             "ok     ratio_above(train/token_mult_prob_error, 1.05) < 0.5 (ratio_above(train/token_mult_prob_error, 1.05) = "
             "0.3333333333333333)\n");
  BOOST_TEST(r.err.empty());
}

BOOST_AUTO_TEST_CASE(check_exits_1_naming_each_failed_expression_and_its_value) {
  const cli_result r = cli({"metrics", "check", run, "mean(train/loss) < 0.1", "min(train/reward) >= -2",
                            "train/reward[1] > -1.15", "mean(train/gen_kl_error) < 0.001", "train/loss[9] < 1"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.out ==
             "FAILED mean(train/loss) < 0.1 (mean(train/loss) = 0.2916666666666667)\n"
             "ok     min(train/reward) >= -2 (min(train/reward) = -1.5)\n"
             "FAILED train/reward[1] > -1.15 (train/reward[1] = -1.5)\n"
             "FAILED mean(train/gen_kl_error) < 0.001: no metric 'train/gen_kl_error' (metrics: refit/bytes, train/loss, "
             "train/reward, train/token_mult_prob_error)\n"
             "FAILED train/loss[9] < 1: metric 'train/loss' has no step 9 (it has 3 steps, from 1 to 3)\n");
  BOOST_TEST(r.err == "tandem metrics check: 4 of 5 checks failed (" + run + "/metrics.jsonl)\n");
}

BOOST_AUTO_TEST_CASE(a_check_that_does_not_parse_is_a_usage_error_before_the_file_is_read) {
  const cli_result r = cli({"metrics", "check", (dir.path() / "nowhere").string(), "train/loss < 1", "max(r) = 1"});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "tandem metrics check: 'train/loss < 1' at column 12: expected '[' and a step after the metric "
                      "train/loss (train/loss[20], or mean(train/loss), median, min, max)\n"
                      "tandem metrics check: 'max(r) = 1' at column 8: expected a comparison: <, <=, >, >= or ==\n"
                      "(see `tandem help metrics` for what a check may say)\n");
  BOOST_TEST(cli({"metrics", "check", run}).code == 2);
}

BOOST_AUTO_TEST_CASE(usage_errors_name_the_problem) {
  BOOST_TEST(cli({"metrics"}).code == 2);
  const cli_result unknown = cli({"metrics", "show", run});
  BOOST_TEST(unknown.code == 2);
  BOOST_TEST(unknown.err.starts_with("tandem metrics: unknown subcommand 'show' (export, check, tensorboard)\n"));
  BOOST_TEST(cli({"metrics", "export"}).err.starts_with("tandem metrics export: missing RUN_DIR\n"));
  BOOST_TEST(cli({"metrics", "export", run, "--out", "x"}).err.starts_with("tandem metrics export: unknown option '--out'\n"));
  BOOST_TEST(cli({"metrics", "tensorboard", run, "--out"}).err.starts_with("tandem metrics tensorboard: option --out needs a value\n"));
  BOOST_TEST(cli({"plot", run, "extra"}).err.starts_with("tandem plot: unexpected argument 'extra' (one RUN_DIR)\n"));
  BOOST_TEST(cli({"plot", run, "--metrics", "a,,b"}).code == 2);
}

BOOST_AUTO_TEST_CASE(tensorboard_writes_one_events_file_of_every_step_into_the_run_directory) {
  const cli_result r = cli({"metrics", "tensorboard", run});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  const auto files = events_files(run);
  BOOST_TEST_REQUIRE(files.size() == 1u);
  BOOST_TEST(r.out == "wrote 3 steps of 4 metrics to " + files[0].string() + " (view: tensorboard --logdir " + run + ")\n");
  // Four records: the file version, then one per step; each framed as length, CRC, data, CRC.
  const std::string file = contents(files[0]);
  std::size_t at = 0, records = 0;
  while (at + 16 <= file.size()) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[at + i]);
    at += 16 + n;
    ++records;
  }
  BOOST_TEST(at == file.size());
  BOOST_TEST(records == 4u);
  BOOST_TEST(file.find("brain.Event:2") != std::string::npos);
  BOOST_TEST(file.find("train/token_mult_prob_error") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_second_conversion_into_the_same_directory_is_refused_and_out_may_name_a_new_one) {
  BOOST_TEST_REQUIRE(cli({"metrics", "tensorboard", run}).code == 0);
  const cli_result again = cli({"metrics", "tensorboard", run});
  BOOST_TEST(again.code == 1);
  BOOST_TEST(again.err.starts_with("tandem metrics tensorboard: " + run + " already holds TensorBoard events (events.out.tfevents."));
  BOOST_TEST(events_files(run).size() == 1u);
  const std::string out = (dir.path() / "tb/nested").string();
  const cli_result elsewhere = cli({"metrics", "tensorboard", run, "--out", out});
  BOOST_TEST_REQUIRE(elsewhere.code == 0, elsewhere.err);
  BOOST_TEST(events_files(out).size() == 1u);
}

BOOST_AUTO_TEST_CASE(plot_draws_the_reward_accuracy_loss_and_error_metrics_into_a_png) {
  const cli_result r = cli({"plot", run});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  const fs::path png = fs::path(run) / "metrics.png";
  BOOST_TEST(r.out == "plotted train/reward, train/loss, train/token_mult_prob_error of " + run + "/metrics.jsonl to " +
                          png.string() + "\n");
  const std::string image = contents(png);
  BOOST_TEST_REQUIRE(image.size() > 8u);
  BOOST_TEST(image.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  BOOST_TEST(!fs::exists(png.string() + ".tmp"));
}

BOOST_AUTO_TEST_CASE(plot_with_metrics_draws_exactly_those_into_the_file_named) {
  const std::string png = (dir.path() / "bytes.png").string();
  const cli_result r = cli({"plot", run, "-o", png, "--metrics", "refit/bytes"});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(r.out == "plotted refit/bytes of " + run + "/metrics.jsonl to " + png + "\n");
  BOOST_TEST(contents(png).substr(0, 4) == "\x89PNG");
}

BOOST_AUTO_TEST_CASE(a_default_plot_leaves_out_timings_whose_names_hold_a_plotted_kind) {
  dir.write("timed/metrics.jsonl", "{\"step\":1,\"train/reward\":0.5,\"timing/train/reward_calculation\":0.001}\n"
                                   "{\"step\":2,\"train/reward\":0.75,\"timing/train/reward_calculation\":0.002}\n");
  const std::string timed = (dir.path() / "timed").string();
  const cli_result r = cli({"plot", timed});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(r.out == "plotted train/reward of " + timed + "/metrics.jsonl to " + timed + "/metrics.png\n");
}

BOOST_AUTO_TEST_CASE(a_single_step_still_plots) {
  dir.write("one/metrics.jsonl", "{\"step\":1,\"loss\":0.5}\n");
  const cli_result r = cli({"plot", (dir.path() / "one").string()});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(contents(dir.path() / "one/metrics.png").substr(0, 4) == "\x89PNG");
}

BOOST_AUTO_TEST_CASE(plot_of_an_unknown_metric_or_of_none_to_show_is_refused_naming_them) {
  const cli_result unknown = cli({"plot", run, "--metrics", "train/loss,train/rewad"});
  BOOST_TEST(unknown.code == 1);
  BOOST_TEST(unknown.err == "tandem plot: no metric 'train/rewad' in " + run +
                                "/metrics.jsonl (metrics: refit/bytes, train/loss, train/reward, train/token_mult_prob_error)\n");
  dir.write("plain/metrics.jsonl", "{\"step\":1,\"tokens\":5}\n");
  const cli_result none = cli({"plot", (dir.path() / "plain").string()});
  BOOST_TEST(none.code == 1);
  BOOST_TEST(none.err == "tandem plot: no reward, accuracy, loss or error metric in " +
                             (dir.path() / "plain/metrics.jsonl").string() + " (metrics: tokens); name some with --metrics\n");
  BOOST_TEST(!fs::exists(fs::path(run) / "metrics.png"));
}

BOOST_AUTO_TEST_CASE(plot_into_a_missing_directory_is_refused_naming_it) {
  const std::string png = (dir.path() / "missing/plot.png").string();
  const cli_result r = cli({"plot", run, "-o", png});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err == "tandem plot: cannot write " + png + ": " + (dir.path() / "missing").string() + " is not a directory\n");
}

BOOST_AUTO_TEST_CASE(plot_without_gnuplot_says_how_to_install_it) {
  const cli_result r = with_path((dir.path() / "no-bin").string(), {"plot", run});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err == "tandem plot: gnuplot is not installed (not found on PATH; Debian: apt-get install gnuplot-nox)\n");
  BOOST_TEST(!fs::exists(fs::path(run) / "metrics.png"));
}

BOOST_AUTO_TEST_CASE(help_describes_metrics_and_plot) {
  const cli_result m = cli({"help", "metrics"});
  BOOST_TEST(m.code == 0);
  BOOST_TEST(m.out.find("ratio_above") != std::string::npos);
  const cli_result p = cli({"help", "plot"});
  BOOST_TEST(p.code == 0);
  BOOST_TEST(p.out.find("gnuplot") != std::string::npos);
  const cli_result all = cli({"help"});
  BOOST_TEST(all.out.find("metrics export RUN_DIR") != std::string::npos);
  BOOST_TEST(all.out.find("plot RUN_DIR") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
