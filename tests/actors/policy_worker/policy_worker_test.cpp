// The policy worker over a fake train engine: versions move with optimizer steps only, requests
// for another version are refused, exports are the current weights' bytes, failures keep the
// version and the weights.
#define CAF_SUITE policy_worker
#include "actors/policy_worker/policy_worker.hpp"

#include <cstring>

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

CAF_TEST(an export is bucket i of the current weights with its checksum) {
  auto r = ask<weight_bucket>(policy, export_atom_v, export_job{0, 1, test_bucket_bytes, true});
  CAF_REQUIRE(r.value.has_value());
  const auto bytes = r.value->view();
  CAF_REQUIRE_EQUAL(bytes.size(), 96u);
  CAF_CHECK_EQUAL(r.value->version, 0u);
  CAF_CHECK_EQUAL(r.value->index, 1u);
  CAF_CHECK(std::memcmp(bytes.data(), trainer->weight_bytes().data() + 96, 96) == 0);
  CAF_REQUIRE(r.value->checksum.has_value());
  CAF_CHECK_EQUAL(*r.value->checksum, bucket_checksum(bytes));
  auto last = ask<weight_bucket>(policy, export_atom_v, export_job{0, 2, test_bucket_bytes, false});
  CAF_REQUIRE(last.value.has_value());
  CAF_CHECK_EQUAL(last.value->view().size(), 64u);
  CAF_CHECK(!last.value->checksum.has_value());
}

CAF_TEST(an export of another version than the current is refused with stale_version) {
  auto r = ask<weight_bucket>(policy, export_atom_v, export_job{1, 0, test_bucket_bytes, false});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: export for v1 refused: the current version is v0");
}

CAF_TEST(an export of a bucket past the plan is refused with invalid_config) {
  auto r = ask<weight_bucket>(policy, export_atom_v, export_job{0, 3, test_bucket_bytes, false});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error), "policy-0: export: bucket 3 out of range (3 buckets)");
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
