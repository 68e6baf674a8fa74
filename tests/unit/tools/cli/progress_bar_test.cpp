// The generation bar (tools/cli/progress_bar.h): cells filled in proportion, all of them only when
// every trajectory is done, and an empty bar for a round of none.
#include <boost/test/unit_test.hpp>

#include <string>

#include "tools/cli/progress_bar.h"

using tandem::cli::progress_bar;

BOOST_AUTO_TEST_SUITE(cli_progress_bar)

BOOST_AUTO_TEST_CASE(the_share_done_fills_that_share_of_the_cells_rounded_down) {
  BOOST_TEST(progress_bar(16, 12, 16) == "generating [############....] 12/16 trajectories");
  BOOST_TEST(progress_bar(10, 1, 3) == "generating [###.......] 1/3 trajectories");
  BOOST_TEST(progress_bar(10, 2, 3) == "generating [######....] 2/3 trajectories");
}

BOOST_AUTO_TEST_CASE(nothing_done_is_an_empty_bar_and_everything_done_a_full_one) {
  BOOST_TEST(progress_bar(8, 0, 16) == "generating [........] 0/16 trajectories");
  BOOST_TEST(progress_bar(8, 16, 16) == "generating [########] 16/16 trajectories");
  BOOST_TEST(progress_bar(8, 15, 16) == "generating [#######.] 15/16 trajectories");
}

BOOST_AUTO_TEST_CASE(a_total_of_zero_is_an_empty_bar_and_done_past_the_total_counts_as_the_total) {
  BOOST_TEST(progress_bar(8, 0, 0) == "generating [........] 0/0 trajectories");
  BOOST_TEST(progress_bar(8, 3, 0) == "generating [........] 0/0 trajectories");
  BOOST_TEST(progress_bar(8, 20, 16) == "generating [########] 16/16 trajectories");
}

BOOST_AUTO_TEST_CASE(the_bar_has_exactly_width_cells) {
  for (std::size_t width : {0u, 1u, 7u, 24u})
    for (std::size_t done = 0; done <= 5; ++done) {
      const std::string bar = progress_bar(width, done, 5);
      const auto open = bar.find('['), close = bar.find(']');
      BOOST_TEST(close - open - 1 == width, bar);
    }
}

BOOST_AUTO_TEST_SUITE_END()
