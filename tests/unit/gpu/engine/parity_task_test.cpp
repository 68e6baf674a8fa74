// The parity task (gpu/engine/parity_task.h): its prompts are a pure function of the seed within
// the documented lengths and token range; its parity reward scores an even last token 1.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "gpu/engine/parity_task.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(parity_task_test)

BOOST_AUTO_TEST_CASE(the_prompts_are_a_pure_function_of_the_seed_with_3_to_8_tokens_in_2_to_vocab) {
  const auto a = tg::parity_prompts(42, 64, 64);
  BOOST_TEST(a.size() == 64u);
  BOOST_TEST((a == tg::parity_prompts(42, 64, 64)));
  BOOST_TEST((a != tg::parity_prompts(43, 64, 64)));
  // A shorter set is the start of the longer one.
  const auto head = tg::parity_prompts(42, 5, 64);
  BOOST_TEST((head == std::vector<std::vector<std::int32_t>>(a.begin(), a.begin() + 5)));
  for (const auto& p : a) {
    BOOST_TEST(p.size() >= 3u);
    BOOST_TEST(p.size() <= 8u);
    for (const std::int32_t t : p) {
      BOOST_TEST(t >= 2);
      BOOST_TEST(t < 64);
    }
  }
  for (const auto& p : tg::parity_prompts(1, 16, 3))
    for (const std::int32_t t : p) BOOST_TEST(t == 2);  // [2, 3) holds one token
}

BOOST_AUTO_TEST_CASE(the_lowest_id_keeps_special_ids_out_and_the_whole_range_above_it_is_drawn) {
  const auto prompts = tg::parity_prompts(7, 64, 256, 3);
  std::vector<bool> seen(256, false);
  for (const auto& p : prompts)
    for (const std::int32_t t : p) {
      BOOST_TEST(t >= 3);
      BOOST_TEST(t < 256);
      if (t >= 0 && t < 256) seen[static_cast<std::size_t>(t)] = true;
    }
  std::size_t distinct = 0;
  for (const bool s : seen) distinct += s ? 1 : 0;
  BOOST_TEST(distinct > 100u);  // 64 prompts of 3 to 8 tokens spread over the range
  for (const auto& p : tg::parity_prompts(1, 16, 3, 3))
    for (const std::int32_t t : p) BOOST_TEST(t == 3);  // an empty range gives only the lowest id
}

BOOST_AUTO_TEST_CASE(the_parity_reward_is_1_for_an_even_last_generated_token_and_0_otherwise) {
  BOOST_TEST(tg::parity_reward({}) == 0.0);
  const std::vector<std::int32_t> even_last = {3, 8}, odd_last = {8, 3}, zero = {0}, negative_even = {-4};
  BOOST_TEST(tg::parity_reward(even_last) == 1.0);
  BOOST_TEST(tg::parity_reward(odd_last) == 0.0);
  BOOST_TEST(tg::parity_reward(zero) == 1.0);
  BOOST_TEST(tg::parity_reward(negative_even) == 1.0);
}

BOOST_AUTO_TEST_SUITE_END()
