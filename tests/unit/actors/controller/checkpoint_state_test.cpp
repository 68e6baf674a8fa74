// A step checkpoint's state.json (actors/controller/checkpoint_state.hpp): the driver's snapshot,
// with a batch generated ahead, reads back field for field (logprobs bit for bit, -0 and
// denormals included); a malformed file is refused naming the field; the retention metric is
// found under its own key or NeMo-RL's spelling.
#include "actors/controller/checkpoint_state.hpp"

#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

using json = nlohmann::json;

namespace {

tandem::controller_state sample() {
  tandem::controller_state s;
  s.step = 6;
  s.version = 6;
  s.driver.live = 6;
  s.driver.next_step = 6;
  s.driver.next_prompt = 28;
  s.driver.next_example = 40;
  s.driver.next_event = 57;
  tandem::driver_snapshot::batch_ahead a;
  a.for_step = 6;
  a.version = 5;
  a.records = {3, 1, 4, 1};
  a.seconds = 0.25;
  tandem::trajectory t;
  t.id = 9;
  t.tokens = {5, 17, 1};
  t.logprobs = {-0.0f, -1.0e-40f, -3.14159274f};
  t.reason = tandem::gpu::finish_reason::stop_token;
  t.weight_version = 5;
  t.prompt_index = 2;
  t.sample_index = 1;
  t.round = 0;
  t.prompt = {2, 8, 8};
  t.worker = "rollout-1";
  t.record = 4;
  t.answer = "12";
  a.trajectories = {t};
  s.driver.ahead = a;
  s.records = {1234, 56789, "events.out.tfevents.1.vm", 777};
  s.recipe = {{"grpo.seed", "42"}, {"policy.optimizer.lr", "0.05"}};
  s.fingerprint = "0123456789abcdef";
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_state_test)

BOOST_AUTO_TEST_CASE(the_state_with_a_batch_generated_ahead_reads_back_field_for_field_and_logprobs_bit_for_bit) {
  const auto s = sample();
  std::string error;
  const auto back = tandem::controller_state_from_json(json::parse(tandem::to_json(s).dump()), error);
  BOOST_TEST_REQUIRE(bool(back), error);
  BOOST_TEST(back->step == 6);
  BOOST_TEST(back->driver.next_prompt == 28u);
  BOOST_TEST(back->driver.next_example == 40u);
  BOOST_TEST(back->driver.next_event == 57u);
  BOOST_TEST(back->records.generations == 56789u);
  BOOST_TEST(back->records.tensorboard_file == "events.out.tfevents.1.vm");
  BOOST_TEST((back->recipe == s.recipe));
  BOOST_TEST(back->fingerprint == s.fingerprint);
  BOOST_TEST_REQUIRE(back->driver.ahead.has_value());
  const auto& a = *back->driver.ahead;
  BOOST_TEST(a.version == 5u);
  BOOST_TEST((a.records == s.driver.ahead->records));
  BOOST_TEST_REQUIRE(a.trajectories.size() == 1u);
  const auto& t = a.trajectories[0];
  const auto& u = s.driver.ahead->trajectories[0];
  BOOST_TEST((t.tokens == u.tokens));
  BOOST_TEST((t.prompt == u.prompt));
  BOOST_TEST(t.worker == u.worker);
  BOOST_TEST(t.answer == u.answer);
  BOOST_TEST(t.record == u.record);
  BOOST_TEST((t.reason == u.reason));
  BOOST_TEST_REQUIRE(t.logprobs.size() == 3u);
  for (std::size_t i = 0; i < 3; ++i)
    BOOST_TEST(std::bit_cast<std::uint32_t>(t.logprobs[i]) == std::bit_cast<std::uint32_t>(u.logprobs[i]));
}

BOOST_AUTO_TEST_CASE(a_state_without_a_batch_ahead_reads_back_without_one) {
  auto s = sample();
  s.driver.ahead.reset();
  std::string error;
  const auto back = tandem::controller_state_from_json(tandem::to_json(s), error);
  BOOST_TEST_REQUIRE(bool(back), error);
  BOOST_TEST(!back->driver.ahead.has_value());
}

BOOST_AUTO_TEST_CASE(a_malformed_state_is_refused_naming_the_field) {
  std::string error;
  json j = tandem::to_json(sample());
  j["driver"]["ahead"]["trajectories"][0]["tokens"] = "five";
  BOOST_TEST(!tandem::controller_state_from_json(j, error));
  BOOST_TEST(error == "driver.ahead.trajectories[0].tokens: has the wrong type");
  j = tandem::to_json(sample());
  j["records"].erase("metrics");
  BOOST_TEST(!tandem::controller_state_from_json(j, error));
  BOOST_TEST(error == "records.metrics: missing");
  j = tandem::to_json(sample());
  j["format_version"] = 2;
  BOOST_TEST(!tandem::controller_state_from_json(j, error));
  BOOST_TEST(error.find("expected tandem-controller-state version 1") != std::string::npos, error);
}

BOOST_AUTO_TEST_CASE(the_retention_metric_is_found_under_its_key_or_nemo_rls_spelling_and_only_when_finite) {
  const json record{{"validation/accuracy", 0.75}, {"train/loss", -0.5}, {"train/reward", nullptr}};
  BOOST_TEST(*tandem::retention_metric(record, "validation/accuracy") == 0.75);
  BOOST_TEST(*tandem::retention_metric(record, "val:accuracy") == 0.75);
  BOOST_TEST(*tandem::retention_metric(record, "train:loss") == -0.5);
  BOOST_TEST(!tandem::retention_metric(record, "train:reward"));
  BOOST_TEST(!tandem::retention_metric(record, "val:pass@4"));
}

BOOST_AUTO_TEST_SUITE_END()
