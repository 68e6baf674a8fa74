// The policy worker over a fake train engine: versions move with optimizer steps only, requests
// for another version are refused, failures keep the version and the weights. Its streams (the
// only way weight bytes leave it) are tested over real refit groups in refit_stream_test.cpp.
#define CAF_SUITE policy_worker
#include "actors/policy_worker/policy_worker.hpp"

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
  auto r = ask<train_report>(policy, train_atom_v, one_micro_batch(0));
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->version, 1u);
  CAF_CHECK_EQUAL(r.value->worker, "policy-0");
  CAF_CHECK_EQUAL(r.value->micro_batches, 1u);
  CAF_CHECK_EQUAL(r.value->metrics.token_count, 3);
  CAF_CHECK_EQUAL(r.value->optimizer.step, 1);
  CAF_CHECK_NOT_EQUAL(trainer->weight_hash(), before);
  CAF_CHECK_EQUAL(version_of(policy), 1u);
}

CAF_TEST(a train job computed with another version is refused with stale_version and changes nothing) {
  const auto before = trainer->weight_hash();
  auto r = ask<train_report>(policy, train_atom_v, one_micro_batch(3));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: train for v3 refused: the current version is v0");
  CAF_CHECK_EQUAL(trainer->weight_hash(), before);
}

CAF_TEST(a failing optimizer step keeps the version and the weights and names the failure) {
  const auto before = trainer->weight_hash();
  trainer->fail_next(gpu::fake_train_operation::optimizer_step);
  auto r = ask<train_report>(policy, train_atom_v, one_micro_batch(0));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("policy-0: train from v0: device_error: optimizer step"), std::string::npos);
  CAF_CHECK_EQUAL(trainer->weight_hash(), before);
  CAF_CHECK_EQUAL(version_of(policy), 0u);
  // and the worker trains again afterwards
  auto again = ask<train_report>(policy, train_atom_v, one_micro_batch(0));
  CAF_REQUIRE(again.value.has_value());
  CAF_CHECK_EQUAL(again.value->version, 1u);
}

CAF_TEST(a failing micro-batch drops the gradients and keeps the version) {
  trainer->fail_next(gpu::fake_train_operation::train_micro_batch);
  auto r = ask<train_report>(policy, train_atom_v, one_micro_batch(0));
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

CAF_TEST(logprobs carry the version that computed them and the manifest is the one of the engine) {
  logprobs_job job;
  job.sequences.tokens = {1, 2, 3};
  job.sequences.offsets = {0, 3};
  auto r = ask<logprobs_result>(policy, logprobs_atom_v, job);
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->version, 0u);
  CAF_CHECK_EQUAL(r.value->logprobs.size(), 3u);
  CAF_CHECK_EQUAL(r.value->logprobs[0], 0.0f);
  auto m = ask<manifest_reply>(policy, manifest_atom_v);
  CAF_REQUIRE(m.value.has_value());
  CAF_CHECK(m.value->manifest == trainer->manifest());
}

CAF_TEST_FIXTURE_SCOPE_END()
