// The arithmetic task (orchestration/environments/arithmetic_task.h): every sum of the operand
// range once, split into held-out and training problems by the seed, and the exact-match reward.
#include "orchestration/environments/arithmetic_task.h"

#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

namespace te = tandem::environments;

BOOST_AUTO_TEST_SUITE(arithmetic_task_test)

BOOST_AUTO_TEST_CASE(every_sum_appears_once_split_into_held_out_and_training_problems_by_the_seed) {
  const auto split = te::arithmetic_problems(7, 9, 30);
  BOOST_TEST(split.validation.size() == 30u);
  BOOST_TEST(split.training.size() == 70u);
  std::set<std::string> seen;
  for (const auto* set : {&split.validation, &split.training})
    for (const auto& p : *set) {
      BOOST_TEST(seen.insert(p.question).second, p.question);
      const auto plus = p.question.find('+');
      const int a = std::stoi(p.question.substr(0, plus)), b = std::stoi(p.question.substr(plus + 1));
      BOOST_TEST(p.question.back() == '=');
      BOOST_TEST(p.answer == std::to_string(a + b));
      BOOST_TEST((a >= 0 && a <= 9 && b >= 0 && b <= 9));
    }
  BOOST_TEST(seen.size() == 100u);
  BOOST_TEST((te::arithmetic_problems(7, 9, 30).validation == split.validation));
  BOOST_TEST((te::arithmetic_problems(8, 9, 30).validation != split.validation));
  BOOST_TEST(te::arithmetic_problems(7, 9, 0).validation.empty());
}

BOOST_AUTO_TEST_CASE(a_response_scores_1_only_when_its_stripped_text_is_the_sum_exactly) {
  BOOST_TEST(te::arithmetic_reward("42", "42") == 1.0);
  BOOST_TEST(te::arithmetic_reward(" 42\n", "42") == 1.0);
  BOOST_TEST(te::arithmetic_reward("4 2", "42") == 0.0);
  BOOST_TEST(te::arithmetic_reward("042", "42") == 0.0);
  BOOST_TEST(te::arithmetic_reward("42+", "42") == 0.0);
  BOOST_TEST(te::arithmetic_reward("", "42") == 0.0);
  BOOST_TEST(te::arithmetic_reward("4", "42") == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
