// Misspelling suggestions.
#include <boost/test/unit_test.hpp>

#include "orchestration/config/suggest.h"

using namespace tandem::config;

BOOST_AUTO_TEST_SUITE(suggest_test)

BOOST_AUTO_TEST_CASE(edit_distance_counts_insertions_deletions_substitutions_and_swaps) {
  BOOST_TEST(edit_distance("seed", "seed") == 0u);
  BOOST_TEST(edit_distance("sed", "seed") == 1u);
  BOOST_TEST(edit_distance("seeds", "seed") == 1u);
  BOOST_TEST(edit_distance("seef", "seed") == 1u);
  BOOST_TEST(edit_distance("esed", "seed") == 1u);
  BOOST_TEST(edit_distance("", "abc") == 3u);
}

BOOST_AUTO_TEST_CASE(the_nearest_close_candidate_is_suggested) {
  const std::vector<std::string> keys{"num_prompts_per_step", "num_generations_per_prompt", "seed"};
  BOOST_TEST(nearest("num_prompt_per_step", keys).value() == "num_prompts_per_step");
  BOOST_TEST(nearest("sede", keys).value() == "seed");
}

BOOST_AUTO_TEST_CASE(nothing_is_suggested_for_an_unrelated_word) {
  const std::vector<std::string> keys{"seed", "val_period"};
  BOOST_TEST(!nearest("tensorboard", keys).has_value());
  BOOST_TEST(!nearest("ab", {"cd"}).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
