// The policy worker over a fake train engine: versions move with train steps only, a train step
// needs its logprob pass first, requests for another version or step are refused, failures keep
// the version and the weights (or, after an optimizer step moved them, refuse everything after). Its streams (the
// only way weight bytes leave it) are tested over real refit groups in refit_stream_test.cpp.
#define CAF_SUITE policy_worker
#include "actors/policy_worker/policy_worker.hpp"

#include <unistd.h>

#include <filesystem>

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

struct fixture : cluster_fixture {
  fixture() { start({}); }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(policy_worker_tests, fixture)

CAF_TEST(a train step moves the version forward by one and changes the weights) {
  const auto before = trainer->weight_hash();
  auto l = ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0));
  CAF_REQUIRE(l.value.has_value());
  auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(0));
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->version, 1u);
  CAF_CHECK_EQUAL(r.value->worker, "policy-0");
  CAF_CHECK_EQUAL(r.value->micro_batches, 1u);
  CAF_CHECK_EQUAL(r.value->optimizer_steps, 1u);
  CAF_CHECK_EQUAL(r.value->metrics.token_count, 3);
  CAF_CHECK_EQUAL(r.value->optimizer.step, 1);
  CAF_CHECK_NOT_EQUAL(trainer->weight_hash(), before);
  CAF_CHECK_EQUAL(version_of(policy), 1u);
}

CAF_TEST(a train job with several optimizer steps steps the optimizer that often and the version once) {
  auto job = one_sequence_logprobs(0);
  job.sequences.tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  job.sequences.offsets = {0, 4, 8};
  job.prompt_tokens = {1, 2};
  job.lp_gen = {-4.2f, -4.2f, -4.2f, -4.2f, -4.2f};
  job.generated_with = {0, 0};
  CAF_REQUIRE(ask<logprobs_result>(policy, logprobs_atom_v, job).value.has_value());
  auto t = one_sequence_train(0);
  t.advantages = {1.0, -1.0};
  t.loss_multipliers = {1.0, 1.0};
  t.optimizer_steps = {optimizer_share{1, {3, 1}}, optimizer_share{1, {2, 1}}};
  auto r = ask<train_report>(policy, train_atom_v, t);
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->optimizer_steps, 2u);
  CAF_CHECK_EQUAL(r.value->optimizer.step, 2);
  CAF_CHECK_EQUAL(r.value->micro_batches, 2u);
  CAF_CHECK_EQUAL(r.value->metrics.token_count, 5);
  CAF_CHECK_EQUAL(r.value->version, 1u);
}

CAF_TEST(each objective trains at its own learning rate and a rate of 0 leaves the weights as they are) {
  // The recipe's rates reach a rank as policy_worker_config::lr: here the RL phase's is 0 (a
  // control run) and the warm-up's 0.5.
  auto engine = std::make_shared<gpu::fake_train_engine>(tiny_model());
  policy_worker_config c;
  c.name = "policy-lr";
  c.engine = engine;
  c.execution = engine_execution::inline_calls;
  c.lr = policy_worker_config::learning_rates{0.0, 0.5};
  auto worker = spawn_policy_worker(sys, c);
  sched.run();
  const auto start = engine->weight_hash();
  CAF_REQUIRE(ask<logprobs_result>(worker, logprobs_atom_v, one_sequence_logprobs(0)).value.has_value());
  auto rl = ask<train_report>(worker, train_atom_v, one_sequence_train(0));
  CAF_REQUIRE(rl.value.has_value());
  CAF_CHECK_EQUAL(rl.value->optimizer.lr, 0.0);
  CAF_CHECK_EQUAL(engine->weight_hash(), start);  // lr 0: not one weight moved
  CAF_CHECK_EQUAL(rl.value->version, 1u);         // the step still counts
  CAF_REQUIRE(ask<logprobs_result>(worker, logprobs_atom_v, one_sequence_logprobs(1, 1)).value.has_value());
  auto sft = one_sequence_train(1, 1);
  sft.objective = train_objective::cross_entropy;
  auto warm = ask<train_report>(worker, train_atom_v, sft);
  CAF_REQUIRE(warm.value.has_value());
  CAF_CHECK_EQUAL(warm.value->optimizer.lr, 0.5);
  CAF_CHECK_NOT_EQUAL(engine->weight_hash(), start);
  CAF_CHECK_EQUAL(warm.value->metrics.token_count, 0);  // no policy-gradient loss ran
  CAF_CHECK(warm.value->loss > 0.0);                    // the targets' cross-entropy
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

CAF_TEST(a train job without its logprob pass is refused with wrong_state and changes nothing) {
  const auto before = trainer->weight_hash();
  auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(0));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: train of step 0 refused: no logprobs were computed for it");
  CAF_CHECK_EQUAL(trainer->weight_hash(), before);
}

CAF_TEST(a train job of another step or with values for other sequences is refused naming the mismatch) {
  CAF_REQUIRE(ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0, 4)).value.has_value());
  auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(0, 5));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: train of step 5 refused: it is for step 5, the logprobs kept are step 4's");
  auto t = one_sequence_train(0, 4);
  t.advantages = {1.0, 2.0};
  r = ask<train_report>(policy, train_atom_v, t);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: train of step 4 refused: advantages holds 2 values for 1 sequences");
  CAF_CHECK_EQUAL(version_of(policy), 0u);
}

CAF_TEST(a logprobs job with a malformed batch is refused naming the field) {
  auto job = one_sequence_logprobs(0);
  job.lp_gen = {-1.0f};
  auto r = ask<logprobs_result>(policy, logprobs_atom_v, job);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: logprobs of step 0: lp_gen holds 1 values for 3 generated tokens");
  job = one_sequence_logprobs(0);
  job.reference = true;
  r = ask<logprobs_result>(policy, logprobs_atom_v, job);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("this rank holds no reference policy"), std::string::npos);
}

CAF_TEST(a train job computed with another version is refused with stale_version and changes nothing) {
  const auto before = trainer->weight_hash();
  auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(3));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: train for v3 refused: the current version is v0");
  CAF_CHECK_EQUAL(trainer->weight_hash(), before);
}

CAF_TEST(a failing optimizer step keeps the version and the weights and names the failure) {
  const auto before = trainer->weight_hash();
  trainer->fail_next(gpu::fake_train_operation::optimizer_step);
  CAF_REQUIRE(ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0)).value.has_value());
  auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(0));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("policy-0: train from v0: device_error: optimizer step"), std::string::npos);
  CAF_CHECK_EQUAL(trainer->weight_hash(), before);
  CAF_CHECK_EQUAL(version_of(policy), 0u);
  // and the worker trains again afterwards, after a new logprob pass
  CAF_REQUIRE(ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0)).value.has_value());
  auto again = ask<train_report>(policy, train_atom_v, one_sequence_train(0));
  CAF_REQUIRE(again.value.has_value());
  CAF_CHECK_EQUAL(again.value->version, 1u);
}

CAF_TEST(a train job failing after one of its optimizer steps leaves the rank refusing until a resume) {
  auto job = one_sequence_logprobs(0);
  job.sequences.tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  job.sequences.offsets = {0, 4, 8};
  job.prompt_tokens = {1, 1};
  job.lp_gen.assign(6, -4.2f);
  job.generated_with = {0, 0};
  CAF_REQUIRE(ask<logprobs_result>(policy, logprobs_atom_v, job).value.has_value());
  auto t = one_sequence_train(0);
  t.advantages = {1.0, 1.0};
  t.loss_multipliers = {1.0, 1.0};
  t.optimizer_steps = {optimizer_share{1, {3, 1}}, optimizer_share{1, {3, 1}}};
  trainer->fail_next(gpu::fake_train_operation::optimizer_step, 1);  // the second optimizer step
  auto r = ask<train_report>(policy, train_atom_v, t);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("optimizer step 2 of 2"), std::string::npos);
  auto next = ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0, 1));
  CAF_REQUIRE(!next.value.has_value());
  CAF_CHECK(is_tandem_error(next.error, tandem_errc::engine_failure));
  CAF_CHECK_EQUAL(text_of(next.error), "policy-0: logprobs refused: step 0 failed after 1 of its optimizer steps had "
                                       "changed the weights of v0; resume the run from its last checkpoint");
  CAF_CHECK_EQUAL(version_of(policy), 0u);
}

CAF_TEST(a failing micro-batch drops the gradients and keeps the version) {
  trainer->fail_next(gpu::fake_train_operation::train_micro_batch);
  CAF_REQUIRE(ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0)).value.has_value());
  auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(0));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("micro-batch 0"), std::string::npos);
  CAF_CHECK_EQUAL(trainer->accumulated_micro_batches(), 0);
  CAF_CHECK_EQUAL(version_of(policy), 0u);
}

CAF_TEST(a stream with engine calls inline is refused without broadcasting anything) {
  // its broadcasts would wait for rollout ranks that cannot run meanwhile
  auto r = ask<stream_report>(policy, stream_atom_v, stream_job{0, 3, test_bucket_bytes, false});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: stream of v0 refused: engine calls run inline, and a stream's broadcasts "
                                    "wait for every rank of the refit group (streams need engine_execution::off_scheduler)");
  CAF_CHECK_EQUAL(version_of(policy), 0u);
}

CAF_TEST(logprobs carry the version that computed them and nothing per token and the manifest is the one of the engine) {
  auto r = ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(0));
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->version, 0u);
  CAF_CHECK_EQUAL(r.value->tokens, 4);
  CAF_CHECK_EQUAL(r.value->excluded_tokens, (std::vector<std::int32_t>{0}));
  auto m = ask<manifest_reply>(policy, manifest_atom_v);
  CAF_REQUIRE(m.value.has_value());
  CAF_CHECK(m.value->manifest == trainer->manifest());
}

CAF_TEST(a save writes the current version where it is asked and refuses another version or names a failed write) {
  const auto dir = std::filesystem::temp_directory_path() / ("tandem-policy-save-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto stale = ask<save_report>(policy, save_atom_v, save_job{2, (dir / "w").string()});
  CAF_REQUIRE(!stale.value.has_value());
  CAF_CHECK(is_tandem_error(stale.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(stale.error), "policy-0: save for v2 refused: the current version is v0");
  CAF_CHECK(!std::filesystem::exists(dir / "w"));
  auto saved = ask<save_report>(policy, save_atom_v, save_job{0, (dir / "w").string()});
  CAF_REQUIRE(saved.value.has_value());
  CAF_CHECK_EQUAL(saved.value->worker, "policy-0");
  CAF_CHECK_EQUAL(saved.value->version, 0u);
  CAF_CHECK_EQUAL(saved.value->directory, (dir / "w").string());
  CAF_CHECK(std::filesystem::is_regular_file(dir / "w" / "weights.bin"));
  trainer->fail_next(gpu::fake_train_operation::save);
  auto failed = ask<save_report>(policy, save_atom_v, save_job{0, (dir / "v").string()});
  CAF_REQUIRE(!failed.value.has_value());
  CAF_CHECK(is_tandem_error(failed.error, tandem_errc::engine_failure));
  CAF_CHECK_NOT_EQUAL(text_of(failed.error).find("policy-0: save of v0 into " + (dir / "v").string() + ": "), std::string::npos);
  CAF_CHECK(!std::filesystem::exists(dir / "v"));
  std::filesystem::remove_all(dir);
}

CAF_TEST_FIXTURE_SCOPE_END()
