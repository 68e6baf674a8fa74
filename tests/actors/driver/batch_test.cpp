// Batch assembly for the policy: packing, masks, micro-batches and shards.
#define CAF_SUITE driver_batch
#include "actors/driver/batch.hpp"

#include <caf/test/dsl.hpp>

using namespace tandem;

namespace {

trajectory make(std::uint32_t prompt, std::vector<std::int32_t> p, std::vector<std::int32_t> gen) {
  trajectory t;
  t.prompt_index = prompt;
  t.prompt = std::move(p);
  t.tokens = std::move(gen);
  for (std::size_t i = 0; i < t.tokens.size(); ++i) t.logprobs.push_back(-1.0f - static_cast<float>(i));
  return t;
}

}  // namespace

CAF_TEST(sequences pack prompt and generated tokens end to end) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}), make(0, {4}, {5, 6})};
  const auto p = pack_sequences(ts, 0, 2);
  CAF_CHECK_EQUAL(p.tokens, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  CAF_CHECK_EQUAL(p.offsets, (std::vector<std::int32_t>{0, 3, 6}));
  CAF_CHECK_EQUAL(pack_sequences(ts, 1, 2).tokens, (std::vector<std::int32_t>{4, 5, 6}));
}

CAF_TEST(micro-batches mask prompt tokens and carry generator and policy logprobs per token) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}), make(0, {4}, {5, 6}), make(1, {7}, {8})};
  const std::vector<float> lp_prev = {0, -10, -11, 0, -12, -13, 0, -14};
  const auto mbs = make_micro_batches(ts, {0.5, -0.5, 0}, lp_prev, 0, 3, 6);  // 3 + 3 tokens, then 2
  CAF_REQUIRE_EQUAL(mbs.size(), 2u);
  const auto& m = mbs[0];
  CAF_CHECK_EQUAL(m.sequences.offsets, (std::vector<std::int32_t>{0, 3, 6}));
  CAF_CHECK_EQUAL(m.mask, (std::vector<float>{0, 0, 1, 0, 1, 1}));
  CAF_CHECK_EQUAL(m.advantages, (std::vector<float>{0.5, 0.5, 0.5, -0.5, -0.5, -0.5}));
  CAF_CHECK_EQUAL(m.lp_gen, (std::vector<float>{0, 0, -1, 0, -1, -2}));
  CAF_CHECK_EQUAL(m.lp_prev, (std::vector<float>{0, -10, -11, 0, -12, -13}));
  CAF_CHECK_EQUAL(mbs[1].lp_prev, (std::vector<float>{0, -14}));
  CAF_CHECK(mbs[1].lp_ref.empty());
}

CAF_TEST(micro-batches pack trajectories while the token budget holds them and give a longer one its own) {
  const std::vector<trajectory> ts = {make(0, {1}, {2}), make(0, {1}, {3, 4}), make(1, {5, 6, 7}, {8, 9, 10}),
                                      make(1, {5}, {6}), make(2, {1}, {2})};
  const std::vector<float> lp_prev(2 + 3 + 6 + 2 + 2, 0.0f);
  const auto mbs = make_micro_batches(ts, {0, 0, 0, 0, 0}, lp_prev, 0, 5, 5);
  CAF_REQUIRE_EQUAL(mbs.size(), 3u);  // [2 + 3 tokens], [6 tokens: over the budget, alone], [2 + 2]
  CAF_CHECK_EQUAL(mbs[0].sequences.offsets, (std::vector<std::int32_t>{0, 2, 5}));
  CAF_CHECK_EQUAL(mbs[1].sequences.offsets, (std::vector<std::int32_t>{0, 6}));
  CAF_CHECK_EQUAL(mbs[2].sequences.offsets, (std::vector<std::int32_t>{0, 2, 4}));
  CAF_CHECK_EQUAL(make_micro_batches(ts, {0, 0, 0, 0, 0}, lp_prev, 1, 4, 100).size(), 1u);
}

CAF_TEST(global counts are the generated tokens and the sequences that have any) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}), make(0, {4}, {}), make(1, {7}, {8, 9})};
  const auto c = count_masked(ts);
  CAF_CHECK_EQUAL(c.tokens, 3);
  CAF_CHECK_EQUAL(c.sequences, 2);
}

CAF_TEST(shards split sequences over ranks as evenly as possible and cover them all) {
  CAF_CHECK_EQUAL(shard_begin(5, 2, 0), 0u);
  CAF_CHECK_EQUAL(shard_begin(5, 2, 1), 2u);
  CAF_CHECK_EQUAL(shard_begin(5, 2, 2), 5u);
  CAF_CHECK_EQUAL(shard_begin(1, 3, 1), 0u);
  CAF_CHECK_EQUAL(shard_begin(1, 3, 3), 1u);
}

CAF_TEST(a trajectory with loss multiplier 0 has no masked token and is left out of the global counts) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}), make(0, {4}, {5, 6}), make(1, {7}, {8})};
  const std::vector<float> lp_prev = {0, -10, -11, 0, -12, -13, 0, -14};
  const auto mbs = make_micro_batches(ts, {0.5, -0.5, 0}, lp_prev, 0, 3, 100, {1, 0, 1});
  CAF_REQUIRE_EQUAL(mbs.size(), 1u);
  CAF_CHECK_EQUAL(mbs[0].mask, (std::vector<float>{0, 0, 1, 0, 0, 0, 0, 1}));
  const auto c = count_masked(ts, {1, 0, 1});
  CAF_CHECK_EQUAL(c.tokens, 2);
  CAF_CHECK_EQUAL(c.sequences, 2);
}
