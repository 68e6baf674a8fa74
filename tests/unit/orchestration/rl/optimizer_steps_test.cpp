// Optimizer steps of a GRPO step: the step's samples split into consecutive global batches of
// train_global_batch_size, each sharded over the data-parallel ranks as [n*r/parts,
// n*(r+1)/parts); a size that does not divide is refused naming both numbers.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "orchestration/rl/optimizer_steps.h"

namespace rl = tandem::rl;

BOOST_AUTO_TEST_SUITE(optimizer_steps_test)

BOOST_AUTO_TEST_CASE(a_rank_shard_is_n_times_r_over_parts_up_to_n_times_r_plus_one_over_parts) {
  // 10 samples over 4 ranks: 10*0/4 = 0, 10/4 = 2, 20/4 = 5, 30/4 = 7, 40/4 = 10.
  const std::vector<rl::sample_range> expected{{0, 2}, {2, 5}, {5, 7}, {7, 10}};
  for (std::int64_t r = 0; r < 4; ++r) {
    const auto s = rl::rank_shard(10, 4, r);
    BOOST_TEST_REQUIRE(static_cast<bool>(s));
    BOOST_TEST((*s == expected[static_cast<std::size_t>(r)]), "rank " << r);
  }
}

BOOST_AUTO_TEST_CASE(a_step_larger_than_the_global_batch_makes_several_optimizer_steps_of_consecutive_samples) {
  // 512 samples, global batch 128: 4 optimizer steps. 128 over 3 ranks: [0, 42), [42, 85), [85, 128)
  // (128/3 = 42.67, 256/3 = 85.33), offset by the batch's start.
  const auto steps = rl::split_optimizer_steps(512, 128, 3);
  BOOST_TEST_REQUIRE(static_cast<bool>(steps));
  BOOST_TEST_REQUIRE(steps->size() == 4u);
  for (std::int64_t s = 0; s < 4; ++s) {
    const auto& b = (*steps)[static_cast<std::size_t>(s)];
    const std::int64_t o = 128 * s;
    BOOST_TEST((b.samples == rl::sample_range{o, o + 128}), "step " << s);
    BOOST_TEST_REQUIRE(b.rank_shards.size() == 3u);
    BOOST_TEST((b.rank_shards[0] == rl::sample_range{o, o + 42}), "step " << s);
    BOOST_TEST((b.rank_shards[1] == rl::sample_range{o + 42, o + 85}), "step " << s);
    BOOST_TEST((b.rank_shards[2] == rl::sample_range{o + 85, o + 128}), "step " << s);
  }
}

BOOST_AUTO_TEST_CASE(a_global_batch_of_the_whole_step_is_one_optimizer_step) {
  const auto steps = rl::split_optimizer_steps(512, 512, 8);
  BOOST_TEST_REQUIRE(static_cast<bool>(steps));
  BOOST_TEST_REQUIRE(steps->size() == 1u);
  BOOST_TEST(((*steps)[0].samples == rl::sample_range{0, 512}));
  BOOST_TEST(((*steps)[0].rank_shards[7] == rl::sample_range{448, 512}));
}

BOOST_AUTO_TEST_CASE(a_step_that_does_not_divide_into_global_batches_is_refused_naming_both_numbers) {
  const auto steps = rl::split_optimizer_steps(512, 384, 2);
  BOOST_TEST_REQUIRE(!steps);
  BOOST_TEST((steps.error().code == rl::rl_errc::does_not_divide));
  BOOST_TEST(steps.error().message ==
             "the step's 512 samples do not split into whole global batches of train_global_batch_size = 384 samples");
}

BOOST_AUTO_TEST_CASE(more_ranks_than_samples_a_rank_out_of_range_and_an_overflowing_shard_are_refused) {
  const auto too_many = rl::split_optimizer_steps(8, 4, 8);
  BOOST_TEST_REQUIRE(!too_many);
  BOOST_TEST(too_many.error().message ==
             "a global batch of train_global_batch_size = 4 samples cannot give each of 8 data-parallel ranks a sample");
  const auto out_of_range = rl::rank_shard(10, 4, 4);
  BOOST_TEST_REQUIRE(!out_of_range);
  BOOST_TEST(out_of_range.error().message == "rank 4 is outside [0, 4)");
  const auto overflow = rl::rank_shard(std::numeric_limits<std::int64_t>::max() / 2, 4, 3);
  BOOST_TEST_REQUIRE(!overflow);
  BOOST_TEST((overflow.error().code == rl::rl_errc::count_overflow));
}

BOOST_AUTO_TEST_SUITE_END()
