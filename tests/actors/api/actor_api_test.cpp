// The actor API's shared pieces: the type-ID block registers every message type, errors keep
// their code and gain the place they passed through, buckets are checksummed with the chunked
// XXH3-64 of gpu/core/chunked_hash.h.
#define CAF_SUITE actor_api
#include "actors/api/error_context.hpp"
#include "actors/api/type_ids.hpp"

#include <typeinfo>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "gpu/core/chunked_hash.h"
#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

using fixture = test_coordinator_fixture<actor_test_config>;

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

}  // namespace

CAF_TEST(a tandem error relayed through a place keeps its code and names the place first) {
  const auto e = relay_error(tandem_error(tandem_errc::stale_version, "rollout-1: bucket 2 of v3 refused"), "refit");
  CAF_CHECK(is_tandem_error(e, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(error_text(e), "refit: rollout-1: bucket 2 of v3 refused");
}

CAF_TEST(a request timeout becomes a tandem timeout and a receiver gone becomes peer_lost) {
  CAF_CHECK(is_tandem_error(relay_error(caf::make_error(caf::sec::request_timeout), "generate"), tandem_errc::timeout));
  CAF_CHECK(is_tandem_error(relay_error(caf::make_error(caf::sec::request_receiver_down), "generate"),
                            tandem_errc::peer_lost));
  CAF_CHECK_EQUAL(error_text(relay_error(caf::make_error(caf::sec::request_timeout), "generate")),
                  "generate: request_timeout");
}

CAF_TEST(an engine status becomes engine_failure naming the place the code and the message) {
  const auto e = engine_error("policy-0: train from v2", gpu::status{gpu::status_code::device_error, "CUDA OOM"});
  CAF_CHECK(is_tandem_error(e, tandem_errc::engine_failure));
  CAF_CHECK_EQUAL(error_text(e), "policy-0: train from v2: device_error: CUDA OOM");
}

CAF_TEST(a plain struct crosses the CAF serializers through its one field list) {
  // The codec and CAF's inspection read the same list (plain/fields.h): the members, in order.
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  const gpu::rng_coordinates rng{42, 3, 1, 7, 2, 9};
  const gpu::ops::sampling_params sampling{0.7, 20, 0.9};
  const gpu::packed_sequences batch{{2, 3, 4, 5}, {0, 1, 4}};
  std::vector<char> buffer;
  caf::binary_serializer sink{sys, buffer};
  CAF_REQUIRE(!sink(rng, sampling, batch));
  gpu::rng_coordinates rng2;
  gpu::ops::sampling_params sampling2;
  gpu::packed_sequences batch2;
  caf::binary_deserializer source{sys, buffer};
  CAF_REQUIRE(!source(rng2, sampling2, batch2));
  CAF_CHECK(rng2 == rng);
  CAF_CHECK(sampling2 == sampling);
  CAF_CHECK(batch2 == batch);
}

CAF_TEST(the jobs and answers that cross processes cross the CAF serializers whole) {
  // Each is one plain struct that both CAF and the control-plane codec read (no second definition).
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  generate_job g{5, {{9, {2, 3}, {0.7, 20, 0.9}, {42, 3, 1, 7, 2, 0}, 16, {1, 106}}}};
  logprobs_job l{3, 5, {{2, 3, 4, 5}, {0, 4}}, {2}, {-0.5f, -1.5f}, {5}, {1.0, 0, 1.0}, true};
  train_job t{3, 5, {0.5}, {1.0}, {{1, {2, 1}}}, 512, {1.0, 0, 1.0}};
  train_report r;
  r.worker = "policy-1";
  r.version = 6;
  // Finite extrema: CAF's binary serializer packs a double with a loop that never ends on an
  // infinity (the metrics' empty extrema). In a process no message is serialized; between
  // processes the control-plane codec carries doubles bit for bit (codec_test).
  r.metrics.ratio_min = 0.25;
  r.metrics.ratio_max = 4.0;
  r.metrics.ratio_clamped_min = 0.5;
  r.metrics.ratio_clamped_max = 2.0;
  r.metrics.clipped_high = 3;
  r.optimizer = {1.5, 3e-6, 7};
  r.weights_digest = 0xFEDCBA9876543210ull;
  const gpu::manifest_entry e{"model.language_model.norm.weight", {64}, gpu::dtype::float32};
  std::vector<char> buffer;
  caf::binary_serializer sink{sys, buffer};
  CAF_REQUIRE(!sink(g, l, t, r, e));
  generate_job g2;
  logprobs_job l2;
  train_job t2;
  train_report r2;
  gpu::manifest_entry e2;
  caf::binary_deserializer source{sys, buffer};
  CAF_REQUIRE(!source(g2, l2, t2, r2, e2));
  CAF_CHECK(g2 == g);
  CAF_CHECK(l2 == l);
  CAF_CHECK(t2 == t);
  CAF_CHECK(r2 == r);
  CAF_CHECK(e2 == e);
}

CAF_TEST(the bucket checksum is the chunked XXH3-64 the fake engines compute) {
  // Known answers of gpu/core/chunked_hash.h's definition (chunked_hash_test pins them too).
  CAF_CHECK_EQUAL(bucket_checksum({}), 0xc77b3abb6f87acd9ull);
  CAF_CHECK_EQUAL(bucket_checksum(bytes_of("a")), 0x6186221013e2d116ull);
  const std::string text = "weights of version 3";
  CAF_CHECK_EQUAL(bucket_checksum(bytes_of(text)), gpu::chunked_xxh3(bytes_of(text)));
}

CAF_TEST_FIXTURE_SCOPE(actor_api_tests, fixture)

CAF_TEST(every message type of the tandem type-ID block is registered by add_tandem_types) {
  for (const char* name : {"tandem::generate_job", "tandem::trajectory", "tandem::generate_result", "tandem::score_job",
                           "tandem::env_feedback", "tandem::score_result", "tandem::logprobs_job",
                           "tandem::logprobs_result", "tandem::train_job", "tandem::train_report",
                           "tandem::manifest_reply", "tandem::manifest_check", "tandem::manifest_accepted",
                           "tandem::refit_ack", "tandem::handshake_report", "tandem::refit_report",
                           "tandem::step_report", "tandem::stream_job", "tandem::stream_report"}) {
    CAF_MESSAGE("checking " << name);
    CAF_CHECK(sys.types().make_value(std::string(name)) != nullptr);
  }
  CAF_CHECK(sys.types().make_value(typeid(step_report)) != nullptr);
}

CAF_TEST(a message summary names the version and the outcome of the stream) {
  refit_ack a{"rollout-1", 4, refit_stage::stream, {}, {}};
  a.stream.checksums = true;
  a.stream.checksums_matched = 3;
  CAF_CHECK_EQUAL(to_string(a), "refit_ack(rollout-1, v4, stream: staged, 3 checksums matched)");
  CAF_CHECK_EQUAL(caf::deep_to_string(caf::make_message(a)), "(refit_ack(rollout-1, v4, stream: staged, 3 checksums matched))");
  a.stream.aborted = true;
  a.stream.failed_bucket = 2;
  a.error = "rollout-1: bucket 2 of v4: transport: payload: io_error: rank 0 left";
  CAF_CHECK_EQUAL(to_string(a), "refit_ack(rollout-1, v4, stream: aborted at bucket 2, 3 checksums matched, error: "
                                "rollout-1: bucket 2 of v4: transport: payload: io_error: rank 0 left)");
  CAF_CHECK_EQUAL(to_string(stream_job{5, 3, 96, true}), "stream_job(v5, 3 buckets of 96 bytes, checksums)");
}

CAF_TEST_FIXTURE_SCOPE_END()
