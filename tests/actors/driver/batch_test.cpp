// The policy ranks' work of a step: packing, each rank's trajectories over the optimizer steps,
// the logprobs job that carries them once, and the global counts of each optimizer step.
#define CAF_SUITE driver_batch
#include "actors/driver/batch.hpp"

#include <caf/test/dsl.hpp>

using namespace tandem;

namespace {

trajectory make(std::uint32_t prompt, std::vector<std::int32_t> p, std::vector<std::int32_t> gen, weight_version v = 0) {
  trajectory t;
  t.prompt_index = prompt;
  t.prompt = std::move(p);
  t.tokens = std::move(gen);
  t.weight_version = v;
  for (std::size_t i = 0; i < t.tokens.size(); ++i) t.logprobs.push_back(-1.0f - static_cast<float>(i));
  return t;
}

std::vector<rl::global_batch> plan(std::int64_t n, std::int64_t global, std::int64_t ranks) {
  auto p = rl::split_optimizer_steps(n, global, ranks);
  CAF_REQUIRE(static_cast<bool>(p));
  return p.value();
}

}  // namespace

CAF_TEST(sequences pack prompt and generated tokens end to end in the order asked) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}), make(0, {4}, {5, 6})};
  const auto p = pack_sequences(ts, {0, 1});
  CAF_CHECK_EQUAL(p.tokens, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  CAF_CHECK_EQUAL(p.offsets, (std::vector<std::int32_t>{0, 3, 6}));
  CAF_CHECK_EQUAL(pack_sequences(ts, {1, 0}).tokens, (std::vector<std::int32_t>{4, 5, 6, 1, 2, 3}));
}

CAF_TEST(a logprobs job carries each trajectory once with its prompt length version and generator logprobs) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}, 4), make(0, {4}, {5, 6}, 4), make(1, {7}, {8}, 4)};
  const auto job = make_logprobs_job(9, 4, ts, {2, 0}, {}, true);
  CAF_CHECK_EQUAL(job.step, 9u);
  CAF_CHECK_EQUAL(job.version, 4u);
  CAF_CHECK_EQUAL(job.sequences.tokens, (std::vector<std::int32_t>{7, 8, 1, 2, 3}));
  CAF_CHECK_EQUAL(job.prompt_tokens, (std::vector<std::int32_t>{1, 2}));
  CAF_CHECK_EQUAL(job.lp_gen, (std::vector<float>{-1, -1}));
  CAF_CHECK_EQUAL(job.generated_with, (std::vector<weight_version>{4, 4}));
  CAF_CHECK(job.reference);
}

CAF_TEST(with one optimizer step each rank takes a contiguous shard) {
  const auto p = plan(5, 5, 2);
  CAF_CHECK_EQUAL(rank_trajectories(p, 0), (std::vector<std::size_t>{0, 1}));
  CAF_CHECK_EQUAL(rank_trajectories(p, 1), (std::vector<std::size_t>{2, 3, 4}));
}

CAF_TEST(with several optimizer steps a rank takes its shard of every global batch in order) {
  const auto p = plan(8, 4, 2);
  CAF_CHECK_EQUAL(rank_trajectories(p, 0), (std::vector<std::size_t>{0, 1, 4, 5}));
  CAF_CHECK_EQUAL(rank_trajectories(p, 1), (std::vector<std::size_t>{2, 3, 6, 7}));
}

CAF_TEST(global counts are the generated tokens less the excluded ones of sequences the loss keeps) {
  const std::vector<trajectory> ts = {make(0, {1, 2}, {3}), make(0, {4}, {}), make(1, {7}, {8, 9}), make(1, {7}, {8})};
  auto c = count_masked(ts, 0, 4);
  CAF_CHECK_EQUAL(c.tokens, 4);
  CAF_CHECK_EQUAL(c.sequences, 3);
  c = count_masked(ts, 0, 4, {1, 1, 1, 0}, {0, 0, 2, 0});  // the third has every token excluded, the fourth is filtered
  CAF_CHECK_EQUAL(c.tokens, 1);
  CAF_CHECK_EQUAL(c.sequences, 1);
  CAF_CHECK_EQUAL(count_masked(ts, 2, 4).tokens, 3);
}

CAF_TEST(a train job carries one advantage and multiplier per sequence and each optimizer steps global counts) {
  const std::vector<trajectory> ts = {make(0, {1}, {2}), make(0, {1}, {3, 4}), make(1, {5}, {6, 7, 8}), make(1, {5}, {6})};
  const auto p = plan(4, 2, 2);  // optimizer step 0: trajectories 0 (rank 0) and 1 (rank 1); step 1: 2 and 3
  const std::vector<double> advantages = {0.5, -0.5, 1.5, -1.5}, multipliers = {1, 1, 1, 0};
  const std::vector<std::int32_t> excluded = {0, 1, 0, 0};
  const auto job = make_train_job(3, 7, p, 1, ts, advantages, multipliers, excluded, 64);
  CAF_CHECK_EQUAL(job.step, 3u);
  CAF_CHECK_EQUAL(job.version, 7u);
  CAF_CHECK_EQUAL(job.advantages, (std::vector<double>{-0.5, -1.5}));
  CAF_CHECK_EQUAL(job.loss_multipliers, (std::vector<double>{1, 0}));
  CAF_REQUIRE_EQUAL(job.optimizer_steps.size(), 2u);
  CAF_CHECK_EQUAL(job.optimizer_steps[0].sequences, 1u);
  CAF_CHECK_EQUAL(job.optimizer_steps[0].counts.tokens, 2);  // 1 + (2 - 1 excluded)
  CAF_CHECK_EQUAL(job.optimizer_steps[0].counts.sequences, 2);
  CAF_CHECK_EQUAL(job.optimizer_steps[1].counts.tokens, 3);  // the fourth is filtered out
  CAF_CHECK_EQUAL(job.optimizer_steps[1].counts.sequences, 1);
  CAF_CHECK_EQUAL(job.micro_batch_tokens, 64);
}
