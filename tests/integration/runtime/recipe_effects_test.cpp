// Recipe keys whose effect only a whole run shows (the schema walk names these tests): the stop
// tokens end responses, jsonl_enabled: false writes no records, and a request that outlives
// runtime.request_timeout_s fails the run naming the request.
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_checks.hpp"

using namespace runtime_test;
using json = nlohmann::json;

BOOST_AUTO_TEST_SUITE(recipe_effects_test)

BOOST_AUTO_TEST_CASE(stop_token_ids_end_every_response_at_its_first_stop_token) {
  tandem::test::temp_dir dir;
  const std::set<std::int32_t> stops = {10, 20, 30, 40, 50};
  child_process run(run_args(colocated_recipe, dir.path(),
                             {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1",
                              "policy.generation.stop_token_ids=[10, 20, 30, 40, 50]"}));
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 0, run.output());
  const auto config = resolved(colocated_recipe, {});
  std::size_t stopped_early = 0, all = 0;
  for (const json& t : records(dir.path() / "generations.jsonl")) {
    const auto tokens = t["tokens"].get<std::vector<std::int32_t>>();
    BOOST_TEST_REQUIRE(!tokens.empty());
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i)
      BOOST_TEST(stops.count(tokens[i]) == 0u, "trajectory " << t["id"] << " ran past stop token " << tokens[i]);
    if (stops.count(tokens.back()) == 1u) {
      ++stopped_early;
      BOOST_TEST(tokens.size() <= static_cast<std::size_t>(config.policy.generation.max_new_tokens));
    } else {
      BOOST_TEST(tokens.size() == static_cast<std::size_t>(config.policy.generation.max_new_tokens));
    }
    ++all;
  }
  BOOST_TEST(all == 2u * 16u);
  BOOST_TEST(stopped_early > 0u, "no response met any of five stop tokens in 32 tokens of a 64-token vocabulary");
}

BOOST_AUTO_TEST_CASE(with_jsonl_disabled_a_run_writes_no_metrics_or_generations) {
  tandem::test::temp_dir dir;
  child_process run(run_args(colocated_recipe, dir.path(),
                             {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1", "logger.jsonl_enabled=false"}));
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 0, run.output());
  BOOST_TEST(run.out().find("step 2/2") != std::string::npos, run.output());
  BOOST_TEST(!std::filesystem::exists(dir.path() / "metrics.jsonl"));
  BOOST_TEST(!std::filesystem::exists(dir.path() / "generations.jsonl"));
}

BOOST_AUTO_TEST_CASE(a_request_past_request_timeout_s_fails_the_run_naming_the_request) {
  tandem::test::temp_dir dir;
  // Heartbeats would notice a stopped member only after a minute: the request deadline fires first.
  child_process run(run_args(dedicated_recipe, dir.path(),
                             {"grpo.max_num_steps=100000", "runtime.fake_weight_mb=1", "runtime.request_timeout_s=1",
                              "runtime.heartbeat_timeout_ms=60000"}));
  BOOST_TEST_REQUIRE(run.await_out(std::regex("step 1/")).has_value(), run.output());
  const auto pids = member_pids(run.out());
  BOOST_TEST_REQUIRE(pids.count(3) == 1u, run.output());
  BOOST_TEST_REQUIRE(::kill(pids.at(3), SIGSTOP) == 0);
  const auto code = run.wait_exit(std::chrono::milliseconds(30000));
  ::kill(pids.at(3), SIGCONT);
  BOOST_TEST_REQUIRE(code.has_value(), "the run did not fail within 30 s of a 1 s request deadline\n" << run.output());
  BOOST_TEST((WIFEXITED(*code) && WEXITSTATUS(*code) == 1), run.output());
  BOOST_TEST(std::regex_search(run.err(), std::regex("failed: .*(timeout|timed out)")), run.output());
}

BOOST_AUTO_TEST_SUITE_END()
