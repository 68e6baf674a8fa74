// Trajectories assembled from what a generator finished (actors/api/trajectories.hpp): the one
// check a local rollout worker and the controller's proxy of a remote one both apply.
#define CAF_SUITE trajectories
#include "actors/api/trajectories.hpp"

#include <caf/test/dsl.hpp>

using namespace tandem;

namespace {

generate_job job_of(std::initializer_list<std::uint64_t> ids, weight_version v) {
  generate_job job;
  job.version = v;
  for (const auto id : ids) {
    gpu::generation_request r;
    r.id = id;
    r.prompt = {2, static_cast<std::int32_t>(id)};
    r.rng = {7, 3, 1, static_cast<std::uint32_t>(id / 2), static_cast<std::uint32_t>(id % 2), 0};
    r.max_new_tokens = 4;
    job.requests.push_back(r);
  }
  return job;
}

gpu::finished_sequence finished(std::uint64_t id, weight_version v) {
  return {id, {5, static_cast<std::int32_t>(id)}, {-0.5f, -1.5f}, gpu::finish_reason::stop_token, v};
}

}  // namespace

CAF_TEST(finished sequences in any order become the jobs trajectories in request order with their prompts) {
  const generate_job job = job_of({4, 1, 3}, 2);
  std::vector<trajectory> out;
  const auto problem = assemble_trajectories(job, {finished(3, 2), finished(4, 2), finished(1, 2)}, "rollout-1", out);
  CAF_REQUIRE(!problem);
  CAF_REQUIRE_EQUAL(out.size(), 3u);
  CAF_CHECK_EQUAL(out[0].id, 4u);
  CAF_CHECK_EQUAL(out[1].id, 1u);
  CAF_CHECK_EQUAL(out[2].id, 3u);
  CAF_CHECK_EQUAL(out[0].prompt, (std::vector<std::int32_t>{2, 4}));
  CAF_CHECK_EQUAL(out[0].tokens, (std::vector<std::int32_t>{5, 4}));
  CAF_CHECK_EQUAL(out[2].prompt_index, 1u);
  CAF_CHECK_EQUAL(out[2].sample_index, 1u);
  CAF_CHECK_EQUAL(out[2].round, 1u);
  CAF_CHECK_EQUAL(out[1].weight_version, 2u);
  CAF_CHECK_EQUAL(out[1].worker, "rollout-1");
  CAF_CHECK(out[1].reason == gpu::finish_reason::stop_token);
}

CAF_TEST(a sequence not asked for or twice or of another version or one missing is refused by name) {
  const generate_job job = job_of({1, 2}, 5);
  std::vector<trajectory> out;
  CAF_CHECK_EQUAL(assemble_trajectories(job, {finished(1, 5), finished(9, 5)}, "w", out).value_or(""),
                  "a sequence for request 9, which the job did not ask for");
  CAF_CHECK_EQUAL(assemble_trajectories(job, {finished(1, 5), finished(1, 5)}, "w", out).value_or(""),
                  "two sequences for request 1");
  CAF_CHECK_EQUAL(assemble_trajectories(job, {finished(1, 5), finished(2, 4)}, "w", out).value_or(""),
                  "mixed versions: sequence 2 was generated with v4, the job asked for v5");
  CAF_CHECK_EQUAL(assemble_trajectories(job, {finished(2, 5)}, "w", out).value_or(""), "request 1 was never finished");
  CAF_CHECK_EQUAL(assemble_trajectories(job_of({3, 3}, 5), {finished(3, 5)}, "w", out).value_or(""),
                  "the job asks for request 3 twice");
}
