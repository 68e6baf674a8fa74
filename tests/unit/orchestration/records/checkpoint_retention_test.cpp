// Which checkpoints a run keeps (orchestration/records/checkpoint_retention.h): pruned after each
// save as a run does, best-N retention keeps exactly the best N and the newest while the metric
// goes up and down, in either direction; steps without the metric rank last; without a metric the
// newest N stay; keep_top_k null keeps all.
#include "orchestration/records/checkpoint_retention.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

namespace tr = tandem::records;
using steps = std::vector<std::int64_t>;

namespace {

/// Saves a checkpoint at each step of `values` in turn, pruning after each save as a run does;
/// returns the steps left after each save.
std::vector<steps> run(const std::vector<std::optional<double>>& values, const tr::retention_rule& rule) {
  std::vector<tr::saved_checkpoint> on_disk;
  std::vector<steps> after;
  for (std::size_t i = 0; i < values.size(); ++i) {
    on_disk.push_back({static_cast<std::int64_t>(i) + 1, values[i]});
    const auto gone = tr::checkpoints_to_remove(on_disk, rule);
    std::erase_if(on_disk, [&](const auto& c) { return std::find(gone.begin(), gone.end(), c.step) != gone.end(); });
    steps left;
    for (const auto& c : on_disk) left.push_back(c.step);
    after.push_back(left);
    BOOST_TEST(left == tr::checkpoints_to_keep(on_disk, rule), boost::test_tools::per_element());
  }
  return after;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_retention_test)

BOOST_AUTO_TEST_CASE(the_best_two_by_a_rising_and_falling_accuracy_and_the_newest_are_kept_after_every_save) {
  const auto after = run({0.2, 0.5, 0.4, 0.7, 0.3, 0.6, 0.65}, {2, true, true});
  const std::vector<steps> expected = {{1}, {1, 2}, {2, 3}, {2, 4}, {2, 4, 5}, {4, 6}, {4, 7}};
  BOOST_TEST_REQUIRE(after.size() == expected.size());
  for (std::size_t i = 0; i < after.size(); ++i) BOOST_TEST(after[i] == expected[i], boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_loss_ranks_lower_first_and_ties_go_to_the_newer_step) {
  const auto after = run({3.0, 1.0, 2.0, 1.0, 5.0}, {2, true, false});
  const std::vector<steps> expected = {{1}, {1, 2}, {2, 3}, {2, 4}, {2, 4, 5}};
  for (std::size_t i = 0; i < after.size(); ++i) BOOST_TEST(after[i] == expected[i], boost::test_tools::per_element());
  // One kept: the best, and the newest besides.
  BOOST_TEST(tr::checkpoints_to_keep({{1, 3.0}, {2, 1.0}, {3, 2.0}}, {1, true, false}) == (steps{2, 3}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(steps_without_the_metric_or_with_a_nan_rank_below_every_step_with_one) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto keep = tr::checkpoints_to_keep({{1, std::nullopt}, {2, 0.1}, {3, nan}, {4, std::nullopt}, {5, 0.05}, {6, std::nullopt}},
                                            {2, true, true});
  BOOST_TEST(keep == (steps{2, 5, 6}), boost::test_tools::per_element());
  // Until a step records it, the newest win.
  BOOST_TEST(tr::checkpoints_to_keep({{1, std::nullopt}, {2, std::nullopt}, {3, std::nullopt}}, {2, true, true}) == (steps{2, 3}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(without_a_metric_the_newest_are_kept_and_without_a_limit_all_are) {
  const std::vector<tr::saved_checkpoint> saved{{10, 0.9}, {20, 0.1}, {30, 0.5}, {40, 0.2}};
  BOOST_TEST(tr::checkpoints_to_keep(saved, {2, false, true}) == (steps{30, 40}), boost::test_tools::per_element());
  BOOST_TEST(tr::checkpoints_to_keep(saved, {std::nullopt, true, true}) == (steps{10, 20, 30, 40}), boost::test_tools::per_element());
  BOOST_TEST(tr::checkpoints_to_remove(saved, {1, false, true}) == (steps{10, 20, 30}), boost::test_tools::per_element());
  BOOST_TEST(tr::checkpoints_to_keep({}, {1, true, true}).empty());
}

BOOST_AUTO_TEST_SUITE_END()
