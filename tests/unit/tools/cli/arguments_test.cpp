// The options parser the commands share (tools/cli/arguments.h): values, flags and repeated
// options; positional arguments for the commands that take them (`metrics`, `plot`: one RUN_DIR);
// and a problem naming the bad argument, as `tandem metrics` and `tandem plot` print it.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "tools/cli/arguments.h"

using tandem::cli::option_spec;
using tandem::cli::parse_options;
using tandem::cli::parsed_options;
using tandem::test::cli;

namespace {

/// As `tandem plot` asks, with a flag besides.
parsed_options parse(const std::vector<std::string>& a) {
  option_spec spec = tandem::cli::one_positional("RUN_DIR", {"-o", "--metrics"});
  spec.flags = {"--json"};
  return parse_options(a, spec);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_arguments)

BOOST_AUTO_TEST_CASE(a_run_dir_with_values_given_apart_or_inline_and_a_flag) {
  const parsed_options p = parse({"-o", "x.png", "runs/a", "--metrics=a,b", "--json"});
  BOOST_TEST(p.problem == "");
  BOOST_TEST(p.positional == std::vector<std::string>{"runs/a"});
  BOOST_TEST(p.values.at("-o") == "x.png");
  BOOST_TEST(p.values.at("--metrics") == "a,b");
  BOOST_TEST(p.flags.count("--json") == 1u);
}

BOOST_AUTO_TEST_CASE(a_value_may_start_with_a_dash_and_a_lone_dash_is_positional) {
  const parsed_options p = parse({"-", "-o", "-x"});
  BOOST_TEST(p.problem == "");
  BOOST_TEST(p.positional == std::vector<std::string>{"-"});
  BOOST_TEST(p.values.at("-o") == "-x");
}

BOOST_AUTO_TEST_CASE(each_bad_argument_is_a_problem_naming_it) {
  BOOST_TEST(parse({"run", "--out", "x"}).problem == "unknown option '--out'");
  BOOST_TEST(parse({"run", "-x=1"}).problem == "unknown option '-x'");
  BOOST_TEST(parse({"run", "--json=yes"}).problem == "unknown option '--json'");
  BOOST_TEST(parse({"run", "-o"}).problem == "option -o needs a value");
  BOOST_TEST(parse({"run", "-o", "a", "-o=b"}).problem == "option -o given twice");
  BOOST_TEST(parse({"run", "extra"}).problem == "unexpected argument 'extra' (one RUN_DIR)");
  BOOST_TEST(parse({"-o", "a"}).problem == "missing RUN_DIR");
}

BOOST_AUTO_TEST_CASE(a_command_without_positional_arguments_lists_its_options_in_a_problem) {
  BOOST_TEST(parse_options({"--frob"}, {"--model"}, {"--json"}).problem == "unknown option '--frob' (options: --model, --json)");
  BOOST_TEST(parse_options({"model"}, {"--model"}, {"--json"}).problem == "unexpected argument 'model' (options: --model, --json)");
  const parsed_options p = parse_options({"--stop", "1", "--stop=106"}, {}, {}, {"--stop"});
  BOOST_TEST(p.problem == "");
  BOOST_TEST(p.repeated.at("--stop") == (std::vector<std::string>{"1", "106"}));
}

BOOST_AUTO_TEST_CASE(metrics_and_plot_refuse_a_bad_flag_naming_it_then_print_their_usage) {
  struct refusal {
    std::vector<std::string> args;
    std::string first_line;
  };
  for (const refusal& c : std::vector<refusal>{
           {{"metrics", "export", "run", "--colour"}, "tandem metrics export: unknown option '--colour'"},
           {{"metrics", "tensorboard", "run", "-o", "x"}, "tandem metrics tensorboard: unknown option '-o'"},
           {{"metrics", "export", "run", "-o"}, "tandem metrics export: option -o needs a value"},
           {{"plot", "run", "--colour=red"}, "tandem plot: unknown option '--colour'"},
           {{"plot", "run", "-o", "a.png", "-o", "b.png"}, "tandem plot: option -o given twice"},
           {{"plot", "--metrics"}, "tandem plot: option --metrics needs a value"},
           {{"plot"}, "tandem plot: missing RUN_DIR"}}) {
    const auto r = cli(c.args);
    BOOST_TEST(r.code == 2);
    BOOST_TEST(r.err.starts_with(c.first_line + "\nusage: tandem "), r.err);
    BOOST_TEST(r.out.empty());
  }
}

BOOST_AUTO_TEST_SUITE_END()
