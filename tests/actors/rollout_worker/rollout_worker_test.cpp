// The rollout worker over a fake generate engine: generation only with the live version, refits
// that become live at commit only, and every failure leaving the previous version live.
#define CAF_SUITE rollout_worker
#include "actors/rollout_worker/rollout_worker.hpp"

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

struct fixture : cluster_fixture {
  fixture() { start({refit_mode::dedicated, 1}); }

  rollout_actor worker() const { return rollout[0]; }
  gpu::fake_generate_engine& engine() { return *generators[0]; }

  generate_job job_for(weight_version version) const {
    generate_job job;
    job.version = version;
    for (std::uint32_t s = 0; s < 3; ++s) {
      gpu::generation_request r;
      r.id = 10 + s;
      r.prompt = {3, 1, 4};
      r.rng = gpu::rng_coordinates{5, 0, 0, 0, s, 0};
      r.max_new_tokens = 4;
      job.requests.push_back(r);
    }
    return job;
  }

  void check_manifest() {
    auto r = ask<manifest_accepted>(worker(), check_atom_v, manifest_check{trainer->manifest(), test_bucket_bytes});
    CAF_REQUIRE(r.value.has_value());
    CAF_REQUIRE_EQUAL(r.value->bucket_count, 3u);
  }

  /// Trains the policy from v0 to v1 and returns its 3 buckets of v1.
  std::vector<weight_bucket> buckets_of_v1(bool checksums = false) {
    CAF_REQUIRE(ask<train_report>(policy, train_atom_v, one_micro_batch(0)).value.has_value());
    std::vector<weight_bucket> out;
    for (std::size_t i = 0; i < 3; ++i) {
      auto b = ask<weight_bucket>(policy, export_atom_v, export_job{1, i, test_bucket_bytes, checksums});
      CAF_REQUIRE(b.value.has_value());
      out.push_back(*b.value);
    }
    return out;
  }

  answer<refit_ack> send_bucket(const weight_bucket& b) { return ask<refit_ack>(worker(), bucket_atom_v, b); }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(rollout_worker_tests, fixture)

CAF_TEST(a generate job for the live version returns the tokens of the weights of that version in request order) {
  const auto job = job_for(0);
  auto r = ask<generate_result>(worker(), generate_atom_v, job);
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->worker, "rollout-0");
  CAF_REQUIRE_EQUAL(r.value->trajectories.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& t = r.value->trajectories[i];
    CAF_CHECK_EQUAL(t.id, job.requests[i].id);
    CAF_CHECK_EQUAL(t.version, 0u);
    CAF_CHECK_EQUAL(t.sample_index, i);
    CAF_CHECK_EQUAL(t.prompt, job.requests[i].prompt);
    CAF_CHECK_EQUAL(t.tokens, gpu::fake_generate_engine::expected_tokens(trainer->weight_hash(), job.requests[i], 64));
    CAF_CHECK_EQUAL(t.logprobs.size(), t.tokens.size());
  }
}

CAF_TEST(a generate job for a stale version is refused with stale_version) {
  auto r = ask<generate_result>(worker(), generate_atom_v, job_for(1));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "rollout-0: generate for v1 refused: v0 is live");
  // after a refit to v1, a job for v0 is the stale one
  check_manifest();
  const auto buckets = buckets_of_v1();
  CAF_REQUIRE(ask<refit_ack>(worker(), begin_atom_v, weight_version{1}).value.has_value());
  for (const auto& b : buckets) CAF_REQUIRE(send_bucket(b).value.has_value());
  CAF_REQUIRE(ask<refit_ack>(worker(), commit_atom_v, weight_version{1}).value.has_value());
  auto old = ask<generate_result>(worker(), generate_atom_v, job_for(0));
  CAF_CHECK(is_tandem_error(old.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(old.error), "rollout-0: generate for v0 refused: v1 is live");
}

CAF_TEST(a bucket refit becomes live at commit only and generation waits for it) {
  check_manifest();
  const auto old_hash = engine().weight_hash();
  const auto buckets = buckets_of_v1();
  auto begun = ask<refit_ack>(worker(), begin_atom_v, weight_version{1});
  CAF_REQUIRE(begun.value.has_value());
  CAF_CHECK(begun.value->stage == refit_stage::begin);
  for (const auto& b : buckets) {
    auto a = send_bucket(b);
    CAF_REQUIRE(a.value.has_value());
    CAF_CHECK(a.value->stage == refit_stage::bucket);
    CAF_CHECK_EQUAL(a.value->bucket, b.index);
    CAF_CHECK_EQUAL(a.value->version, 1u);
  }
  CAF_CHECK_EQUAL(version_of(worker()), 0u);
  CAF_CHECK_EQUAL(engine().weight_hash(), old_hash);
  auto during = ask<generate_result>(worker(), generate_atom_v, job_for(0));
  CAF_CHECK(is_tandem_error(during.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(during.error), "rollout-0: generate refused: a refit to v1 is in progress");
  auto committed = ask<refit_ack>(worker(), commit_atom_v, weight_version{1});
  CAF_REQUIRE(committed.value.has_value());
  CAF_CHECK(committed.value->stage == refit_stage::commit);
  CAF_CHECK_EQUAL(version_of(worker()), 1u);
  CAF_CHECK_EQUAL(engine().weight_hash(), trainer->weight_hash());
  auto after = ask<generate_result>(worker(), generate_atom_v, job_for(1));
  CAF_REQUIRE(after.value.has_value());
  CAF_CHECK_EQUAL(after.value->trajectories[0].version, 1u);
}

CAF_TEST(a bucket failing mid-way drops the update and leaves the previous version live) {
  check_manifest();
  const auto buckets = buckets_of_v1();
  CAF_REQUIRE(ask<refit_ack>(worker(), begin_atom_v, weight_version{1}).value.has_value());
  CAF_REQUIRE(send_bucket(buckets[0]).value.has_value());
  engine().fail_next(gpu::fake_generate_operation::import_bucket);
  auto failed = send_bucket(buckets[1]);
  CAF_REQUIRE(!failed.value.has_value());
  CAF_CHECK(is_tandem_error(failed.error, tandem_errc::engine_failure));
  CAF_CHECK_NOT_EQUAL(text_of(failed.error).find("rollout-0: bucket 1 of v1 (update dropped, v0 stays live)"),
                      std::string::npos);
  CAF_CHECK_NOT_EQUAL(text_of(failed.error).find("injected failure in import_bucket"), std::string::npos);
  CAF_CHECK_EQUAL(version_of(worker()), 0u);
  CAF_CHECK(!engine().pending_version().has_value());
  // the rest of the update is refused, generation with v0 works again
  auto rest = send_bucket(buckets[2]);
  CAF_CHECK(is_tandem_error(rest.error, tandem_errc::wrong_state));
  CAF_CHECK(ask<generate_result>(worker(), generate_atom_v, job_for(0)).value.has_value());
}

CAF_TEST(a corrupted bucket fails its checksum and leaves the previous version live) {
  check_manifest();
  auto buckets = buckets_of_v1(true);
  CAF_REQUIRE(ask<refit_ack>(worker(), begin_atom_v, weight_version{1}).value.has_value());
  auto corrupted = std::make_shared<std::vector<std::byte>>(*buckets[0].bytes);
  (*corrupted)[17] ^= std::byte{0x40};
  buckets[0].bytes = corrupted;
  auto r = send_bucket(buckets[0]);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error),
                  "rollout-0: bucket 0 of v1: checksum mismatch (corrupted in transit); update dropped, v0 stays live");
  CAF_CHECK_EQUAL(version_of(worker()), 0u);
  CAF_CHECK(!engine().pending_version().has_value());
}

CAF_TEST(a bucket of another version than the update is refused with stale_version and the update goes on) {
  check_manifest();
  const auto buckets = buckets_of_v1();
  CAF_REQUIRE(ask<refit_ack>(worker(), begin_atom_v, weight_version{1}).value.has_value());
  weight_bucket old = buckets[0];
  old.version = 0;
  auto r = send_bucket(old);
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "rollout-0: bucket 0 of v0 refused: updating to v1");
  for (const auto& b : buckets) CAF_REQUIRE(send_bucket(b).value.has_value());
  CAF_REQUIRE(ask<refit_ack>(worker(), commit_atom_v, weight_version{1}).value.has_value());
  CAF_CHECK_EQUAL(version_of(worker()), 1u);
}

CAF_TEST(abort drops the update and answers the live version) {
  check_manifest();
  const auto buckets = buckets_of_v1();
  CAF_REQUIRE(ask<refit_ack>(worker(), begin_atom_v, weight_version{1}).value.has_value());
  CAF_REQUIRE(send_bucket(buckets[0]).value.has_value());
  auto live = ask<weight_version>(worker(), abort_atom_v, weight_version{1});
  CAF_REQUIRE(live.value.has_value());
  CAF_CHECK_EQUAL(*live.value, 0u);
  CAF_CHECK(!engine().pending_version().has_value());
  auto commit = ask<refit_ack>(worker(), commit_atom_v, weight_version{1});
  CAF_CHECK(is_tandem_error(commit.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(version_of(worker()), 0u);
}

CAF_TEST(a refit needs a checked manifest and a manifest unlike the layout of the worker is refused) {
  auto early = ask<refit_ack>(worker(), begin_atom_v, weight_version{1});
  CAF_CHECK(is_tandem_error(early.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(early.error), "rollout-0: begin v1 refused: no manifest checked");
  auto other = trainer->manifest();
  other[2].shape = {7};
  auto r = ask<manifest_accepted>(worker(), check_atom_v, manifest_check{other, test_bucket_bytes});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("rollout-0: manifest refused: manifest entry 2"), std::string::npos);
}

CAF_TEST(a refit to a version not newer than the live one is refused with stale_version) {
  check_manifest();
  auto r = ask<refit_ack>(worker(), begin_atom_v, weight_version{0});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  auto b = ask<refit_ack>(worker(), bump_atom_v, weight_version{0});
  CAF_CHECK(is_tandem_error(b.error, tandem_errc::stale_version));
}

CAF_TEST_FIXTURE_SCOPE_END()
