// A step's rewards and advantages from scored trajectories: scaling, overlong shaping, the
// group baseline over shaped rewards and the std over unshaped ones, normalisation, clips and
// overlong filtering, wired as the driver uses them.
#define CAF_SUITE driver_step_rewards
#include "actors/driver/step_rewards.hpp"

#include <cmath>

#include <caf/test/dsl.hpp>

using namespace tandem;

namespace {

trajectory make(std::uint32_t prompt, std::size_t generated, gpu::finish_reason reason) {
  trajectory t;
  t.prompt_index = prompt;
  t.prompt = {1, 2};
  t.tokens.assign(generated, 7);
  t.reason = reason;
  return t;
}

constexpr auto stop = gpu::finish_reason::stop_token;
constexpr auto length = gpu::finish_reason::length;

// Group 0: A (1 token, reward 1), B (3 tokens, truncated, reward 1), C (4 tokens, truncated,
// reward 0); group 1: D and E (2 tokens, reward 0).
std::vector<trajectory> batch() {
  return {make(0, 1, stop), make(0, 3, length), make(0, 4, length), make(1, 2, stop), make(1, 2, stop)};
}
const std::vector<double> raw = {1, 1, 0, 0, 0};

// {0, 1} -> {-1, +1}; overlong shaping with max_response_length 4 and a buffer of 2 (expected
// length 2, penalty 1): A 1 + 0, B 1 - 0.5, C -1 - 1, D and E -1 + 0.
step_reward_settings dapo() {
  step_reward_settings s;
  s.scaling = {true, 0, 1, -1, 1};
  s.shaping = {true, 2, 1.0, 4};
  return s;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want) {
  CAF_REQUIRE_EQUAL(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    CAF_CHECK_LESS_OR_EQUAL(std::abs(got[i] - want[i]), 1e-12);
}

}  // namespace

CAF_TEST(without scaling or shaping an advantage is the reward minus the mean reward of its prompt group) {
  const auto r = compute_step_rewards(batch(), raw, 2, {});
  CAF_REQUIRE(r);
  check_close(r->total, raw);
  check_close(r->advantages, {1 - 2.0 / 3, 1 - 2.0 / 3, -2.0 / 3, 0, 0});
  CAF_CHECK_EQUAL(r->filtered, 0);
}

CAF_TEST(dapo rewards are scaled then shaped and the baseline averages the shaped rewards) {
  const auto r = compute_step_rewards(batch(), raw, 2, dapo());
  CAF_REQUIRE(r);
  check_close(r->total, {1, 0.5, -2, -1, -1});
  // Group 0's baseline: (1 + 0.5 - 2) / 3 = -1/6; group 1 is all -1: advantage 0.
  check_close(r->advantages, {1 + 1.0 / 6, 0.5 + 1.0 / 6, -2 + 1.0 / 6, 0, 0});
}

CAF_TEST(normalised advantages divide by the std of the unshaped rewards and the clips clamp them) {
  auto s = dapo();
  s.advantages.normalize_rewards = true;
  // Unshaped rewards of group 0: 1, 1, -1; Bessel std sqrt(4/3) = 1.1547005383792515.
  const double sd = std::sqrt(4.0 / 3) + 1e-6;
  auto r = compute_step_rewards(batch(), raw, 2, s);
  CAF_REQUIRE(r);
  check_close(r->advantages, {(1 + 1.0 / 6) / sd, (0.5 + 1.0 / 6) / sd, (-2 + 1.0 / 6) / sd, 0, 0});
  s.advantages.clip_high = 1.0;
  s.advantages.clip_low = -1.5;
  r = compute_step_rewards(batch(), raw, 2, s);
  CAF_REQUIRE(r);
  check_close(r->advantages, {1.0, (0.5 + 1.0 / 6) / sd, -1.5, 0, 0});
}

CAF_TEST(the leave one out baseline takes the others of the group and a group of agreeing others has std 0) {
  auto s = dapo();
  s.baseline = rl::baseline_kind::leave_one_out;
  s.advantages.normalize_rewards = true;
  const auto r = compute_step_rewards(batch(), raw, 2, s);
  CAF_REQUIRE(r);
  // A: others B, C: baseline (0.5 - 2) / 2 = -0.75, std of unshaped (1, -1) = sqrt(2).
  // B: others A, C: baseline -0.5, std sqrt(2). C: others A, B: baseline 0.75, std 0 (not divided).
  const double sd = std::sqrt(2.0) + 1e-6;
  check_close(r->advantages, {(1 + 0.75) / sd, (0.5 + 0.5) / sd, -2 - 0.75, 0, 0});
}

CAF_TEST(overlong filtering gives the truncated trajectories a loss multiplier of 0) {
  auto s = dapo();
  s.overlong_filtering = true;
  const auto r = compute_step_rewards(batch(), raw, 2, s);
  CAF_REQUIRE(r);
  check_close(r->loss_multipliers, {1, 0, 0, 1, 1});
  CAF_CHECK_EQUAL(r->filtered, 2);
}

CAF_TEST(a reward that is not finite or a prompt index out of range is refused naming the sample) {
  auto bad = raw;
  bad[3] = std::nan("");
  auto r = compute_step_rewards(batch(), bad, 2, {});
  CAF_REQUIRE(!r);
  CAF_MESSAGE(r.error().message);
  CAF_CHECK(r.error().message.find("[3]") != std::string::npos);
  r = compute_step_rewards(batch(), raw, 1, {});
  CAF_REQUIRE(!r);
  CAF_MESSAGE(r.error().message);
  CAF_CHECK(r.error().message.find("groups[3]") != std::string::npos);
}
