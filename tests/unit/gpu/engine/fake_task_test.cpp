// The fake task (gpu/engine/fake/fake_task.h): its prompts are a pure function of the seed within
// the documented lengths and token range; its parity reward scores an even last token 1.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "gpu/engine/fake/fake_task.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(fake_task_test)

BOOST_AUTO_TEST_CASE(the_prompts_are_a_pure_function_of_the_seed_with_3_to_8_tokens_in_2_to_vocab) {
  const auto a = tg::fake_prompts(42, 64, 64);
  BOOST_TEST(a.size() == 64u);
  BOOST_TEST((a == tg::fake_prompts(42, 64, 64)));
  BOOST_TEST((a != tg::fake_prompts(43, 64, 64)));
  // A shorter set is the start of the longer one.
  const auto head = tg::fake_prompts(42, 5, 64);
  BOOST_TEST((head == std::vector<std::vector<std::int32_t>>(a.begin(), a.begin() + 5)));
  for (const auto& p : a) {
    BOOST_TEST(p.size() >= 3u);
    BOOST_TEST(p.size() <= 8u);
    for (const std::int32_t t : p) {
      BOOST_TEST(t >= 2);
      BOOST_TEST(t < 64);
    }
  }
  for (const auto& p : tg::fake_prompts(1, 16, 3))
    for (const std::int32_t t : p) BOOST_TEST(t == 2);  // [2, 3) holds one token
}

BOOST_AUTO_TEST_CASE(the_parity_reward_is_1_for_an_even_last_generated_token_and_0_otherwise) {
  BOOST_TEST(tg::fake_parity_reward({}) == 0.0);
  const std::vector<std::int32_t> even_last = {3, 8}, odd_last = {8, 3}, zero = {0}, negative_even = {-4};
  BOOST_TEST(tg::fake_parity_reward(even_last) == 1.0);
  BOOST_TEST(tg::fake_parity_reward(odd_last) == 0.0);
  BOOST_TEST(tg::fake_parity_reward(zero) == 1.0);
  BOOST_TEST(tg::fake_parity_reward(negative_even) == 1.0);
}

BOOST_AUTO_TEST_SUITE_END()
