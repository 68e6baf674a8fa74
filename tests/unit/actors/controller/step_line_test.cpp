// A step's line (actors/controller/step_line.hpp) from a hand-filled report: the compact form a
// terminal shows, the full form a log keeps (refit, control bytes, weights digest), and what each
// says when there is nothing to say (no tokens, no digest, ranks that differ).
#include <boost/test/unit_test.hpp>

#include <string>

#include "actors/controller/step_line.hpp"

namespace {

/// Step 3 of 60: v2 -> v3 by a dedicated refit of 4 buckets, 192 tokens each scored exactly.
tandem::step_report third_step() {
  tandem::step_report r;
  r.step = 2;
  r.generated_with = 2;
  r.trained_to = 3;
  r.reward_mean = 0.625;
  r.train_tokens = 192;
  r.loss = -0.0123;  // the step's loss as the driver reports it (the KL term included)
  r.metrics.token_count = 192;
  r.metrics.mult_prob_error_sum = 192.0;
  r.metrics.gen_kl_error_sum = 0.0;
  r.refit.mode = tandem::refit_mode::dedicated;
  r.refit.buckets = 4;
  r.refit.bytes = 1048576;
  r.weights_digests = {0xabcull, 0xabcull};
  return r;
}

tandem::step_line_facts third_of_sixty() {
  tandem::step_line_facts f;
  f.number = 3;
  f.steps = 60;
  f.traffic.sent_bytes = 4000;
  f.traffic.received_bytes = 1120;
  f.traffic.heartbeat_bytes = 77;  // heartbeats are not the step's traffic
  f.seconds = 0.114;
  return f;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(controller_step_line)

BOOST_AUTO_TEST_CASE(the_compact_line_holds_reward_loss_tmpe_gen_kl_tokens_seconds_and_versions) {
  const auto line = tandem::format_step_line(third_step(), third_of_sixty());
  BOOST_TEST(line.compact == "step 3/60  reward 0.625  loss -0.0123  tmpe 1.0000  gen_kl 0.0e+00  192 tok  0.11 s  v2->v3");
}

BOOST_AUTO_TEST_CASE(the_full_line_adds_the_refit_the_control_bytes_and_the_weights_digest) {
  const auto line = tandem::format_step_line(third_step(), third_of_sixty());
  BOOST_TEST(line.full ==
             "step 3/60: reward 0.625, loss -0.0123, tmpe 1.0000, gen_kl 0.0e+00, 192 tokens, v2 -> v3 live (dedicated refit, "
             "4 buckets, 1048576 bytes), control 5120 bytes, 0.11 s, weights 0x0000000000000abc on every policy rank");
}

BOOST_AUTO_TEST_CASE(a_step_without_tokens_or_digests_shows_zeros_and_no_weights) {
  tandem::step_report r = third_step();
  r.metrics.token_count = 0;
  r.weights_digests.clear();
  const auto line = tandem::format_step_line(r, third_of_sixty());
  BOOST_TEST(line.compact.find("  tmpe 0.0000  gen_kl 0.0e+00  ") != std::string::npos, line.compact);
  BOOST_TEST(line.full.ends_with("control 5120 bytes, 0.11 s"), line.full);
}

BOOST_AUTO_TEST_CASE(policy_ranks_whose_digests_differ_are_named_so) {
  tandem::step_report r = third_step();
  r.weights_digests = {0x1ull, 0x2ull};
  const auto line = tandem::format_step_line(r, third_of_sixty());
  BOOST_TEST(line.full.ends_with(", weights 0x0000000000000001 (ranks differ)"), line.full);
  BOOST_TEST(line.compact.find("weights") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_colocated_steps_turns_show_what_moved_and_the_memory_in_use_beside_the_plan) {
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  tandem::step_report r = third_step();
  r.turns.offloads = 1;
  r.turns.restores = 1;
  r.turns.offloaded_bytes = r.turns.restored_bytes = static_cast<std::uint64_t>(2 * gib);
  r.turns.offload_seconds = 0.5;
  r.turns.restore_seconds = 0.25;
  r.turns.cache_release_seconds = 0.002;
  r.turns.cache_restore_seconds = 0.004;
  r.turns.host_link_gb_per_s = 52;
  r.turns.training_in_use_bytes = static_cast<std::uint64_t>(70 * gib);
  r.turns.generation_in_use_bytes = static_cast<std::uint64_t>(11 * gib);
  tandem::step_line_facts f = third_of_sixty();
  f.plan = {68.5 * gib, 10 * gib};
  BOOST_TEST(tandem::format_step_line(r, f).full.ends_with(
                 "; turns: optimizer state 2 GiB offloaded in 0.5 s (4.29 GB/s), restored in 0.25 s (8.59 GB/s), host link "
                 "52 GB/s; KV cache freed in 0.002 s, made in 0.004 s; in use as training ended 70 GiB (plan 68.5), as "
                 "generation ended 11 GiB (plan 10)"),
             tandem::format_step_line(r, f).full);
  // The first step has no offload (the member's start made it) and a CPU run no memory figure.
  r.turns.offloads = 0;
  r.turns.offloaded_bytes = 0;
  r.turns.offload_seconds = 0;
  r.turns.training_in_use_bytes = r.turns.generation_in_use_bytes = 0;
  BOOST_TEST(tandem::format_step_line(r, f).full.ends_with(
                 "; turns: optimizer state 2 GiB restored in 0.25 s (8.59 GB/s), host link 52 GB/s; KV cache freed in "
                 "0.002 s, made in 0.004 s"),
             tandem::format_step_line(r, f).full);
}

BOOST_AUTO_TEST_SUITE_END()
