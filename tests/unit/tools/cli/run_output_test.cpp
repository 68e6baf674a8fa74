// What `tandem run` prints (tools/cli/run_output.h), on streams standing in for a terminal and for
// a pipe, with a fixed clock: a terminal gets plain lines, compact step lines and a bar redrawn
// with '\r' and erased before the next line; a pipe and controller.log get timestamped lines, step
// lines in full, and never a bar or a '\r'.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "actors/bridge/log_line.hpp"
#include "orchestration/records/record_file.h"
#include "support/temp_dir.h"
#include "tools/cli/run_output.h"

namespace {

using std::chrono::system_clock;

/// 2026-12-02T01:02:03.456Z.
system_clock::time_point an_instant() {
  return system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(
      std::chrono::milliseconds(((20789LL * 24 + 1) * 60 + 2) * 60 * 1000 + 3456)));
}

const std::string stamp = "2026-12-02T01:02:03.456Z ";

std::string contents(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct output_fixture {
  tandem::test::temp_dir dir;
  std::shared_ptr<tandem::records::record_file> log =
      tandem::records::record_file::create(dir.path() / "controller.log").value();
  std::ostringstream out, err;

  /// One run's output: `terminal` says whether stdout and stderr stand for a terminal.
  std::unique_ptr<tandem::cli::run_output> output(bool terminal) {
    return std::make_unique<tandem::cli::run_output>(out, terminal, err, terminal, log, an_instant);
  }
  /// The same lines of one step, as the run writes them.
  void one_step(tandem::cli::run_output& o) {
    o.out("all 2 members joined");
    o.generation(0, 16);
    o.generation(8, 16);
    o.generation(16, 16);
    o.step("step 1/2  reward 0.500", "step 1/2: reward 0.500, control 12 bytes");
    o.err("tandem run: failed: nothing");
  }
  std::string logged() const { return contents(dir.path() / "controller.log"); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(cli_run_output, output_fixture)

BOOST_AUTO_TEST_CASE(off_a_terminal_every_line_is_timestamped_steps_are_in_full_and_no_bar_or_carriage_return_is_written) {
  one_step(*output(false));
  BOOST_TEST(out.str() == stamp + "all 2 members joined\n" + stamp + "step 1/2: reward 0.500, control 12 bytes\n");
  BOOST_TEST(err.str() == stamp + "tandem run: failed: nothing\n");
  BOOST_TEST(out.str().find('\r') == std::string::npos);
  BOOST_TEST(err.str().find('\r') == std::string::npos);
  BOOST_TEST(out.str().find("generating") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(on_a_terminal_lines_are_plain_steps_compact_and_the_bar_is_redrawn_in_place_then_erased) {
  one_step(*output(true));
  BOOST_TEST(out.str() == "all 2 members joined\n"
                          "\rgenerating [........................] 0/16 trajectories\033[K"
                          "\rgenerating [############............] 8/16 trajectories\033[K"
                          "\rgenerating [########################] 16/16 trajectories\033[K"
                          "\r\033[K"
                          "step 1/2  reward 0.500\n");
  BOOST_TEST(err.str() == "tandem run: failed: nothing\n");
}

BOOST_AUTO_TEST_CASE(a_line_to_stderr_erases_the_bar_first) {
  auto o = output(true);
  o->generation(3, 4);
  o->err("tandem run: failed: nothing");
  BOOST_TEST(out.str() == "\rgenerating [##################......] 3/4 trajectories\033[K\r\033[K");
  BOOST_TEST(err.str() == "tandem run: failed: nothing\n");
}

BOOST_AUTO_TEST_CASE(a_bar_left_drawn_is_erased_when_the_output_ends) {
  output(true)->generation(1, 4);
  BOOST_TEST(out.str().ends_with("1/4 trajectories\033[K\r\033[K"));
}

BOOST_AUTO_TEST_CASE(controller_log_holds_timestamped_full_lines_and_no_bar_whatever_the_terminal) {
  for (const bool terminal : {true, false}) {
    BOOST_TEST_CONTEXT("terminal " << terminal) {
      tandem::test::temp_dir d;
      log = tandem::records::record_file::create(d.path() / "controller.log").value();
      one_step(*output(terminal));
      BOOST_TEST(contents(d.path() / "controller.log") == stamp + "all 2 members joined\n" + stamp +
                                                              "step 1/2: reward 0.500, control 12 bytes\n" + stamp +
                                                              "tandem run: failed: nothing\n");
    }
  }
}

BOOST_AUTO_TEST_CASE(control_characters_in_a_line_are_shown_escaped_so_it_stays_one_line) {
  output(false)->out("host\nname\r");
  BOOST_TEST(out.str().find('\r') == std::string::npos);
  BOOST_TEST(out.str().find('\n') == out.str().size() - 1, out.str());
}

BOOST_AUTO_TEST_CASE(the_runtimes_own_lines_are_copied_to_controller_log_timestamped_while_the_output_lives) {
  {
    const auto o = output(false);
    tandem::log_line("tandem controller: a line of the runtime");
  }
  tandem::log_line("tandem controller: after the run");
  BOOST_TEST(logged() == stamp + "tandem controller: a line of the runtime\n");
}

BOOST_AUTO_TEST_CASE(streams_other_than_the_processs_own_are_never_terminals) {
  BOOST_TEST(!tandem::cli::is_terminal(out));
}

BOOST_AUTO_TEST_SUITE_END()
