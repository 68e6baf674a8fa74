// What a policy rank builds from its kept step batch: per-token loss inputs expanded from one
// advantage and loss multiplier per sequence, micro-batches cut by token budget, sampled tokens
// the trainer's masks exclude (lp_prev -inf) left out of the loss, and malformed jobs named.
#define CAF_SUITE policy_step_batch
#include "actors/policy_worker/step_batch.hpp"

#include <limits>

#include <caf/test/dsl.hpp>

using namespace tandem;

namespace {

constexpr float minus_inf = -std::numeric_limits<float>::infinity();

/// Three sequences: [1 2 | 3], [4 | 5 6], [7 | 8] (prompt | generated).
step_batch three_sequences() {
  step_batch b;
  b.step = 2;
  b.version = 5;
  b.sequences.tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  b.sequences.offsets = {0, 3, 6, 8};
  b.prompt_tokens = {2, 1, 1};
  b.lp_gen = {-1, -2, -3, -4};
  b.lp_prev = {0, -10, -11, 0, -12, -13, 0, -14};
  b.excluded = {0, 0, 0};
  return b;
}

}  // namespace

CAF_TEST(micro-batches mask prompt tokens and carry generator and policy logprobs per token) {
  const auto b = three_sequences();
  const auto mbs = make_micro_batches(b, 0, 3, {0.5, -0.5, 0}, {1, 1, 1}, 6);  // 3 + 3 tokens, then 2
  CAF_REQUIRE_EQUAL(mbs.size(), 2u);
  const auto& m = mbs[0];
  CAF_CHECK_EQUAL(m.sequences.tokens, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  CAF_CHECK_EQUAL(m.sequences.offsets, (std::vector<std::int32_t>{0, 3, 6}));
  CAF_CHECK_EQUAL(m.mask, (std::vector<float>{0, 0, 1, 0, 1, 1}));
  CAF_CHECK_EQUAL(m.advantages, (std::vector<float>{0.5, 0.5, 0.5, -0.5, -0.5, -0.5}));
  CAF_CHECK_EQUAL(m.lp_gen, (std::vector<float>{0, 0, -1, 0, -2, -3}));
  CAF_CHECK_EQUAL(m.lp_prev, (std::vector<float>{0, -10, -11, 0, -12, -13}));
  CAF_CHECK_EQUAL(mbs[1].lp_prev, (std::vector<float>{0, -14}));
  CAF_CHECK_EQUAL(mbs[1].lp_gen, (std::vector<float>{0, -4}));
  CAF_CHECK(mbs[1].lp_ref.empty());
}

CAF_TEST(micro-batches cover only the optimizer steps sequences and pack them while the budget holds) {
  const auto b = three_sequences();
  const auto mbs = make_micro_batches(b, 1, 3, {0, 0, 0}, {1, 1, 1}, 100);
  CAF_REQUIRE_EQUAL(mbs.size(), 1u);
  CAF_CHECK_EQUAL(mbs[0].sequences.tokens, (std::vector<std::int32_t>{4, 5, 6, 7, 8}));
  CAF_CHECK_EQUAL(make_micro_batches(b, 0, 3, {0, 0, 0}, {1, 1, 1}, 2).size(), 3u);  // each over the budget: alone
}

CAF_TEST(a sequence with loss multiplier 0 has no masked token) {
  const auto b = three_sequences();
  const auto mbs = make_micro_batches(b, 0, 3, {0.5, -0.5, 0}, {1, 0, 1}, 100);
  CAF_REQUIRE_EQUAL(mbs.size(), 1u);
  CAF_CHECK_EQUAL(mbs[0].mask, (std::vector<float>{0, 0, 1, 0, 0, 0, 0, 1}));
}

CAF_TEST(a sampled token whose lp_prev is minus infinity leaves the loss and is counted) {
  auto b = three_sequences();
  b.lp_prev[4] = minus_inf;  // sequence 1's first generated token
  CAF_CHECK_EQUAL(excluded_tokens(b.sequences, b.prompt_tokens, b.lp_prev), (std::vector<std::int32_t>{0, 1, 0}));
  const auto mbs = make_micro_batches(b, 0, 3, {1, 1, 1}, {1, 1, 1}, 100);
  CAF_CHECK_EQUAL(mbs[0].mask, (std::vector<float>{0, 0, 1, 0, 0, 1, 0, 1}));
}

CAF_TEST(the reference logprobs ride along per token when the batch has them) {
  auto b = three_sequences();
  b.lp_ref = {0, -1, -2, 0, -3, -4, 0, -5};
  const auto mbs = make_micro_batches(b, 2, 3, {1, 1, 1}, {1, 1, 1}, 100);
  CAF_CHECK_EQUAL(mbs[0].lp_ref, (std::vector<float>{0, -5}));
}

CAF_TEST(a malformed logprobs job is named by its first bad field) {
  logprobs_job job;
  job.sequences.tokens = {1, 2, 3};
  job.sequences.offsets = {0, 3};
  job.prompt_tokens = {1};
  job.generated_with = {0};
  job.lp_gen = {-1, -1};
  CAF_CHECK(!check_logprobs_job(job));
  job.prompt_tokens = {4};
  CAF_CHECK_EQUAL(check_logprobs_job(job).value_or(""), "sequence 0: prompt_tokens 4 outside [1, 3]");
  job.prompt_tokens = {1, 1};
  CAF_CHECK_EQUAL(check_logprobs_job(job).value_or(""), "prompt_tokens holds 2 values for 1 sequences");
  job.prompt_tokens = {2};
  CAF_CHECK_EQUAL(check_logprobs_job(job).value_or(""), "lp_gen holds 2 values for 1 generated tokens");
  job.sequences.offsets = {0, 2};
  CAF_CHECK_EQUAL(check_logprobs_job(job).value_or(""), "sequences.offsets must rise from 0 to the token count (3)");
}

CAF_TEST(a train job that does not fit the kept batch is named) {
  const auto b = three_sequences();
  train_job job;
  job.step = 2;
  job.advantages = {0, 0, 0};
  job.loss_multipliers = {1, 1, 1};
  job.optimizer_steps = {optimizer_share{2, {}}, optimizer_share{1, {}}};
  CAF_CHECK(!check_train_job(job, b));
  job.optimizer_steps = {optimizer_share{2, {}}};
  CAF_CHECK_EQUAL(check_train_job(job, b).value_or(""), "its optimizer steps cover 2 sequences, the logprobs kept 3");
  job.optimizer_steps.clear();
  CAF_CHECK_EQUAL(check_train_job(job, b).value_or(""), "it has no optimizer step");
  job.loss_multipliers = {1};
  CAF_CHECK_EQUAL(check_train_job(job, b).value_or(""), "loss_multipliers holds 1 values for 3 sequences");
}
