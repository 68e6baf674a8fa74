// Tests of the control-plane codec (orchestration/control/codec.hpp): every message kind round-trips
// field for field and re-encodes to the same bytes; the header is laid out as documented; and
// malformed frames (another version, bad magic, unknown kind, every truncation, huge declared
// lengths, bad bools and enums, trailing bytes, frames above the limit) are refused with a reason
// and an offset, without allocating what a corrupt length declares.
#include "orchestration/control/codec.hpp"

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

namespace tc = tandem::control;

namespace tandem::control {
/// Boost.Test prints kinds by name.
std::ostream& boost_test_print_type(std::ostream& out, message_kind k) { return out << to_string(k); }
}  // namespace tandem::control

// ---- allocation probe: the largest single allocation while a probe is alive ------------------
// Replaces the global operator new of this test executable (tandem_control_tests only).

namespace {
std::atomic<bool> probing{false};
std::atomic<std::size_t> largest_allocation{0};
}  // namespace

void* operator new(std::size_t n) {
  if (probing.load(std::memory_order_relaxed)) {
    std::size_t seen = largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !largest_allocation.compare_exchange_weak(seen, n)) {
    }
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// Not inlined: g++ would otherwise see free() meet a pointer from `new` and warn of a mismatch.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

/// Records the largest allocation made between its construction and largest().
class allocation_probe {
 public:
  allocation_probe() {
    largest_allocation = 0;
    probing = true;
  }
  ~allocation_probe() { probing = false; }
  std::size_t largest() const { return largest_allocation.load(); }
};

// ---- samples: one message per kind, every field away from its default -----------------------

std::vector<tc::manifest_entry> sample_entries() {
  using tandem::plain::dtype;
  return {{"model.language_model.embed_tokens.weight", {262144, 1536}, dtype::bfloat16},
          {"model.language_model.layers.0.self_attn.q_proj.weight", {2048, 1536}, dtype::bfloat16},
          {"model.language_model.norm.weight", {1536}, dtype::float32},
          {"", {}, dtype::uint8}};
}

/// A message of kind `k` whose every field differs from its default, so a field the codec forgot
/// comes back different.
tc::message sample(tc::message_kind k) {
  using K = tc::message_kind;
  switch (k) {
    case K::hello:
      return tc::hello{.rank = 3, .world_size = 8, .pid = 4194301, .hostname = "node-07.cluster",
                       .device = "cuda:3", .version = 7, .offered = {.policy = true, .rollout = true}};
    case K::welcome:
      return tc::welcome{.assigned = {.policy = false, .rollout = true}, .data_parallel_rank = 1,
                         .data_parallel_size = 2, .rollout_rank = 5, .rollout_size = 6,
                         .recipe_yaml = "defaults: grpo_math_1b\npolicy:\n  model_name: tiny-all\n\xC3\xA9\n",
                         .run_id = "run-2026-11-03-a", .heartbeat_interval_ms = 500, .heartbeat_timeout_ms = 10000};
    case K::heartbeat:
      return tc::heartbeat{.sender_rank = -1, .sequence = 0x0123456789ABCDEFull};
    case K::data_endpoint:
      return tc::data_endpoint{.rank = 2, .data_parallel_endpoint = "tcp://10.0.0.3:41234",
                               .refit_endpoint = "ipc:///tmp/tandem-refit-2",
                               .nccl_unique_id = {std::byte{0}, std::byte{0xFF}, std::byte{0x7F}, std::byte{0x80}}};
    case K::peer_table:
      return tc::peer_table{.peers = {{0, "tcp://10.0.0.2:40000", "tcp://10.0.0.2:40100"},
                                      {1, "tcp://10.0.0.2:40001", ""},
                                      {2, "", "tcp://10.0.0.4:40002"}},
                            .ring = {1, 0},
                            .refit_group = {0, 2},
                            .nccl_unique_id = std::vector<std::byte>(128, std::byte{0xA5})};
    case K::manifest:
      return tc::manifest{.weight_version = 77, .entries = sample_entries()};
    case K::manifest_check:
      return tc::manifest_check{.bucket_bytes = std::uint64_t{1} << 30, .entries = sample_entries()};
    case K::manifest_result:
      return tc::manifest_result{.rank = 4, .ok = true, .message = "entry 12: shape [2048, 1536] vs [4096, 1536]",
                                 .weight_version = 3, .bucket_count = 19, .total_bytes = std::uint64_t{61} << 30};
    case K::generate_request: {
      tc::generate_request r{.job = {.version = 40, .requests = {}}};
      r.job.requests.push_back({.id = 9001, .prompt = {2, 105, 2364},
                                .sampling = {.temperature = 0.7, .top_k = 50, .top_p = 0.95},
                                .rng = {7, 41, 2, 0, 0, 0}, .max_new_tokens = 1024, .stop_tokens = {1, 106}});
      r.job.requests.push_back({.id = 9002, .prompt = {2, -1, std::numeric_limits<std::int32_t>::max()},
                                .sampling = {.temperature = 0, .top_k = -1, .top_p = 1e-300},
                                .rng = {std::numeric_limits<std::uint64_t>::max(), 41, 2, 0, 15, 3},
                                .max_new_tokens = -2, .stop_tokens = {}});
      r.job.requests.push_back({.id = 0, .prompt = {}, .sampling = {}, .rng = {}, .max_new_tokens = 0, .stop_tokens = {}});
      return r;
    }
    case K::generate_result:
      return tc::generate_result{
          .weight_version = 40,
          .sequences = {{9001, {10, 11, 1}, {-0.5f, -1e-30f, -0.0f}, tc::finish_reason::stop_token, 40},
                        {9002, {12}, {-std::numeric_limits<float>::infinity()}, tc::finish_reason::length, 39}}};
    case K::logprob_request:
      return tc::logprob_request{
          .step = 12,
          .job = {.step = 6, .version = 11, .sequences = {{2, 3, 4, 5, 6}, {0, 2, 5}}, .prompt_tokens = {1, 2},
                  .lp_gen = {-0.25f, -1e-30f, -std::numeric_limits<float>::max()}, .generated_with = {11, 10},
                  .sampling = {.temperature = 1.5, .top_k = -3, .top_p = 1e-300}, .reference = true}};
    case K::logprob_result:
      return tc::logprob_result{
          .step = 12, .result = {.worker = "policy-3", .version = 11, .excluded_tokens = {0, 3, -1}, .tokens = 1234567890123}};
    case K::train_request:
      return tc::train_request{
          .step = 12,
          .job = {.step = 6, .version = 11, .advantages = {0.5, -1e-300, 2.75}, .loss_multipliers = {1, 0, 1},
                  .optimizer_steps = {{2, {123456789012, -4}}, {1, {7, 1}}}, .micro_batch_tokens = 4096,
                  .sampling = {.temperature = 0.6, .top_k = 20, .top_p = 0.9}}};
    case K::train_result: {
      tc::train_result r{.step = 12, .report = {}};
      tc::train_report& t = r.report;
      t.worker = "policy-1";
      t.version = 13;
      t.micro_batches = 4;
      t.optimizer_steps = 3;
      // every metric away from its default, each to another value
      double value = 0.5;
      tandem::plain::for_each_field(t.metrics, [&](const char*, auto& m) { m = static_cast<std::remove_reference_t<decltype(m)>>(value += 1.25); });
      t.loss = -0.0123;
      t.optimizer = {.grad_norm = 1.75, .lr = 3e-6, .step = 9};
      t.grad_norm_sum = 5.25;
      t.weights_digest = 0xFEDCBA9876543210ull;
      return r;
    }
    case K::refit_begin:
      return tc::refit_begin{.weight_version = 13, .bucket_count = 17, .bucket_bytes = std::uint64_t{1} << 33,
                             .transport = tc::refit_transport::colocated_bump, .root_rank = 6,
                             .checksums = true};
    case K::refit_ack:
      return tc::refit_ack{.rank = 5, .weight_version = 13, .stage = tc::refit_stage::staged, .ok = false,
                           .error = "bucket 3: checksum mismatch", .error_code = 9, .live_version = 12,
                           .aborted = true, .failed_bucket = 3, .checksums = true,
                           .checksums_matched = std::uint64_t{1} << 40, .checksum_mismatch = -7};
    case K::refit_commit:
      return tc::refit_commit{.weight_version = 14};
    case K::refit_abort:
      return tc::refit_abort{.weight_version = 15};
    case K::error:
      return tc::error{.code = 65535, .text = "member 3 (node-07, cuda:3) missed 20 heartbeats", .rank = 3,
                       .request = 13};
    case K::shutdown:
      return tc::shutdown{.reason = std::string("step 12 failed\0with a NUL inside", 32), .failed = true};
    case K::goodbye:
      return tc::goodbye{.rank = 7, .reason = "shutdown requested"};
    case K::save_request:
      return tc::save_request{.step = 41,
                              .job = {.version = 252,
                                      .directory = "/runs/tiny-cpu/checkpoints/step_252.partial/ranks/policy-3.json",
                                      .part = tandem::plain::save_part::attestation}};
    case K::save_result:
      return tc::save_result{.step = 41,
                             .report = {.worker = "policy-0", .version = 252, .directory = "/runs/tiny-cpu/final_weights",
                                        .weights_digest = 0xFEDCBA9876543210ull}};
    case K::load_request:
      return tc::load_request{.step = 42, .job = {.version = 250, .directory = "/runs/tiny-cpu/checkpoints/step_250/weights"}};
    case K::load_result:
      return tc::load_result{.step = 42, .report = {.worker = "policy-7", .version = 250, .weights_digest = 0x0123456789ABCDEFull}};
  }
  BOOST_FAIL("no sample for kind " << static_cast<int>(k));
  return tc::message{};
}

tc::frame encoded(const tc::message& m, std::size_t limit = tc::max_frame_bytes) {
  auto r = tc::encode(m, limit);
  BOOST_REQUIRE_MESSAGE(r.ok(), "encode failed: " << (r.ok() ? "" : r.error().text));
  return std::move(r).value();
}

std::span<const std::byte> bytes_of(const tc::frame& f) { return {f.data(), f.size()}; }

/// decode(encode(sample)) equals the sample, names the right kind, and re-encodes to the same bytes.
void check_round_trip(tc::message_kind k) {
  const tc::message m = sample(k);
  BOOST_REQUIRE(tc::kind_of(m) == k);
  const tc::frame f = encoded(m);
  BOOST_TEST(std::to_integer<int>(f[6]) + 256 * std::to_integer<int>(f[7]) == static_cast<int>(k));
  const auto d = tc::decode(bytes_of(f));
  BOOST_REQUIRE_MESSAGE(d.ok(), "decode failed: " << (d.ok() ? "" : d.error().text));
  BOOST_TEST(tc::kind_of(d.value()) == k);
  BOOST_TEST((d.value() == m), "the decoded " << tc::to_string(k) << " differs from the sample");
  BOOST_TEST((encoded(d.value()) == f), "the decoded " << tc::to_string(k) << " re-encodes to other bytes");
}

/// A frame whose decoding must fail; returns the error.
tc::codec_error refused(const tc::frame& f, std::size_t limit = tc::max_frame_bytes) {
  const auto d = tc::decode(bytes_of(f), limit);
  BOOST_REQUIRE_MESSAGE(!d.ok(), "a malformed frame decoded as " << (d.ok() ? tc::to_string(tc::kind_of(d.value())) : ""));
  return d.error();
}

void put_u16(tc::frame& f, std::size_t at, std::uint16_t v) {
  f[at] = std::byte(v & 0xFF);
  f[at + 1] = std::byte(v >> 8);
}
void put_u32(tc::frame& f, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) f[at + i] = std::byte((v >> (8 * i)) & 0xFF);
}
bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(codec_test)

// ---- one round trip per kind ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_hello_round_trips_field_for_field) { check_round_trip(tc::message_kind::hello); }
BOOST_AUTO_TEST_CASE(a_welcome_round_trips_field_for_field) { check_round_trip(tc::message_kind::welcome); }
BOOST_AUTO_TEST_CASE(a_heartbeat_round_trips_field_for_field) { check_round_trip(tc::message_kind::heartbeat); }
BOOST_AUTO_TEST_CASE(a_data_endpoint_round_trips_field_for_field) { check_round_trip(tc::message_kind::data_endpoint); }
BOOST_AUTO_TEST_CASE(a_peer_table_round_trips_field_for_field) { check_round_trip(tc::message_kind::peer_table); }
BOOST_AUTO_TEST_CASE(a_manifest_round_trips_field_for_field) { check_round_trip(tc::message_kind::manifest); }
BOOST_AUTO_TEST_CASE(a_manifest_check_round_trips_field_for_field) { check_round_trip(tc::message_kind::manifest_check); }
BOOST_AUTO_TEST_CASE(a_manifest_result_round_trips_field_for_field) { check_round_trip(tc::message_kind::manifest_result); }
BOOST_AUTO_TEST_CASE(a_generate_request_round_trips_field_for_field) { check_round_trip(tc::message_kind::generate_request); }
BOOST_AUTO_TEST_CASE(a_generate_result_round_trips_field_for_field) { check_round_trip(tc::message_kind::generate_result); }
BOOST_AUTO_TEST_CASE(a_logprob_request_round_trips_field_for_field) { check_round_trip(tc::message_kind::logprob_request); }
BOOST_AUTO_TEST_CASE(a_logprob_result_round_trips_field_for_field) { check_round_trip(tc::message_kind::logprob_result); }
BOOST_AUTO_TEST_CASE(a_train_request_round_trips_field_for_field) { check_round_trip(tc::message_kind::train_request); }
BOOST_AUTO_TEST_CASE(a_train_result_round_trips_field_for_field) { check_round_trip(tc::message_kind::train_result); }
BOOST_AUTO_TEST_CASE(a_refit_begin_round_trips_field_for_field) { check_round_trip(tc::message_kind::refit_begin); }
BOOST_AUTO_TEST_CASE(a_refit_ack_round_trips_field_for_field) { check_round_trip(tc::message_kind::refit_ack); }
BOOST_AUTO_TEST_CASE(a_refit_commit_round_trips_field_for_field) { check_round_trip(tc::message_kind::refit_commit); }
BOOST_AUTO_TEST_CASE(a_refit_abort_round_trips_field_for_field) { check_round_trip(tc::message_kind::refit_abort); }
BOOST_AUTO_TEST_CASE(an_error_round_trips_field_for_field) { check_round_trip(tc::message_kind::error); }
BOOST_AUTO_TEST_CASE(a_shutdown_round_trips_field_for_field) { check_round_trip(tc::message_kind::shutdown); }
BOOST_AUTO_TEST_CASE(a_goodbye_round_trips_field_for_field) { check_round_trip(tc::message_kind::goodbye); }
BOOST_AUTO_TEST_CASE(a_save_request_round_trips_field_for_field) { check_round_trip(tc::message_kind::save_request); }
BOOST_AUTO_TEST_CASE(a_save_result_round_trips_field_for_field) { check_round_trip(tc::message_kind::save_result); }
BOOST_AUTO_TEST_CASE(a_load_request_round_trips_field_for_field) { check_round_trip(tc::message_kind::load_request); }
BOOST_AUTO_TEST_CASE(a_load_result_round_trips_field_for_field) { check_round_trip(tc::message_kind::load_result); }

BOOST_AUTO_TEST_CASE(every_kind_has_a_round_trip_case_above_and_default_messages_round_trip_too) {
  // The cases above cover codes 1 .. kind_count; a new kind without a case fails here.
  BOOST_TEST(tc::kind_count == 25);
  BOOST_TEST(std::variant_size_v<tc::message> == 25u);
  for (std::uint16_t code = 1; code <= tc::kind_count; ++code) {
    const auto k = static_cast<tc::message_kind>(code);
    BOOST_TEST_CONTEXT("kind " << tc::to_string(k)) {
      BOOST_TEST(tc::to_string(k) != "unknown");
      tc::message empty = sample(k);
      std::visit([](auto& m) { m = std::decay_t<decltype(m)>{}; }, empty);  // every field at its default
      const auto d = tc::decode(bytes_of(encoded(empty)));
      BOOST_REQUIRE(d.ok());
      BOOST_TEST((d.value() == empty));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_header_and_a_heartbeat_body_are_laid_out_as_codec_hpp_documents) {
  const tc::frame f = encoded(tc::heartbeat{.sender_rank = -1, .sequence = 0x0102030405060708ull});
  const std::vector<int> expected = {'T', 'N', 'D', 'M', 11, 0, 3, 0, 12, 0, 0, 0,        // header (protocol 11)
                                     0xFF, 0xFF, 0xFF, 0xFF,                              // sender_rank -1
                                     0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};     // sequence
  std::vector<int> got;
  for (const std::byte b : f) got.push_back(std::to_integer<int>(b));
  BOOST_TEST(got == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(strings_are_a_uint32_length_then_bytes_and_doubles_their_ieee_bits) {
  const tc::frame s = encoded(tc::shutdown{.reason = "ab"});
  BOOST_REQUIRE(s.size() == 12u + 4 + 2 + 1);  // the header, the length, the bytes, then `failed`
  BOOST_TEST(std::to_integer<int>(s[12]) == 2);
  BOOST_TEST(std::to_integer<int>(s[16]) == 'a');
  BOOST_TEST(std::to_integer<int>(s[17]) == 'b');
  tc::train_result m{.step = 0, .report = {}};
  m.report.metrics.pg_loss = -2.0;
  const tc::frame t = encoded(m);
  std::uint64_t bits = 0;  // after step 8, worker 4, version 8, micro_batches 8, optimizer_steps 8: metrics.pg_loss
  for (int i = 0; i < 8; ++i) bits |= std::uint64_t{std::to_integer<std::uint8_t>(t[12 + 36 + i])} << (8 * i);
  BOOST_TEST(bits == 0xC000000000000000ull);  // -2.0
}

BOOST_AUTO_TEST_CASE(a_nan_survives_bit_for_bit) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  tc::train_result m{.step = 1, .report = {}};
  m.report.loss = -nan;
  m.report.metrics.ratio_sum = nan;
  const tc::frame f = encoded(m);
  const auto d = tc::decode(bytes_of(f));
  BOOST_REQUIRE(d.ok());
  BOOST_TEST(std::isnan(std::get<tc::train_result>(d.value()).report.loss));
  BOOST_TEST(std::isnan(std::get<tc::train_result>(d.value()).report.metrics.ratio_sum));
  BOOST_TEST((encoded(d.value()) == f));
}

// ---- refused frames -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_frame_of_another_protocol_version_is_refused_naming_both_versions) {
  tc::frame f = encoded(sample(tc::message_kind::hello));
  put_u16(f, 4, 1);
  const tc::codec_error e = refused(f);
  BOOST_TEST((e.code == tc::codec_errc::version_mismatch));
  BOOST_TEST(e.offset == 4u);
  BOOST_TEST(mentions(e.text, "protocol version 1"), e.text);
  BOOST_TEST(mentions(e.text, "this build speaks 11"), e.text);
}

BOOST_AUTO_TEST_CASE(a_small_kind_declaring_a_body_beyond_its_kinds_limit_is_refused_before_anything_is_read) {
  // A heartbeat header that declares a 1 MiB body: refused from the header alone, whatever follows.
  tc::frame f = encoded(sample(tc::message_kind::heartbeat));
  f.resize(tc::header_bytes + (std::size_t{1} << 20));
  put_u32(f, 8, static_cast<std::uint32_t>(std::size_t{1} << 20));
  const tc::codec_error e = refused(f);
  BOOST_TEST((e.code == tc::codec_errc::too_large));
  BOOST_TEST(e.offset == 8u);
  BOOST_TEST(mentions(e.text, "the heartbeat body length 1048576 at byte 8 exceeds the 1024-byte limit of a heartbeat frame"),
             e.text);
  // Encoding holds the same limit: a hello whose hostname outgrows 64 KiB is not sent.
  tc::hello h;
  h.hostname.assign(std::size_t{70} << 10, 'h');
  const auto big = tc::encode(h);
  BOOST_TEST_REQUIRE(!big.ok());
  BOOST_TEST((big.error().code == tc::codec_errc::too_large));
  // Every kind's limit is within the frame limit, and the bulk kinds may use all of it.
  for (std::uint16_t k = 1; k <= tc::kind_count; ++k)
    BOOST_TEST(tc::max_frame_bytes_of(static_cast<tc::message_kind>(k)) <= tc::max_frame_bytes);
  BOOST_TEST(tc::max_frame_bytes_of(tc::message_kind::generate_result) == tc::max_frame_bytes);
  BOOST_TEST(tc::max_frame_bytes_of(tc::message_kind::train_request) == tc::max_frame_bytes);
}

BOOST_AUTO_TEST_CASE(a_frame_with_bad_magic_is_refused) {
  tc::frame f = encoded(sample(tc::message_kind::goodbye));
  f[3] = std::byte{'X'};
  const tc::codec_error e = refused(f);
  BOOST_TEST((e.code == tc::codec_errc::bad_magic));
  BOOST_TEST(e.offset == 0u);
  BOOST_TEST(mentions(e.text, "bad magic 0x58444E54 at byte 0, expected 0x4D444E54"), e.text);
}

BOOST_AUTO_TEST_CASE(a_frame_of_an_unknown_kind_is_refused_naming_the_kind) {
  const std::uint16_t codes[] = {77, 0, tc::kind_count + 1, 65535};
  for (const std::uint16_t code : codes) {
    tc::frame f = encoded(sample(tc::message_kind::heartbeat));
    put_u16(f, 6, code);
    const tc::codec_error e = refused(f);
    BOOST_TEST((e.code == tc::codec_errc::unknown_kind));
    BOOST_TEST(e.offset == 6u);
    BOOST_TEST(mentions(e.text, "unknown kind " + std::to_string(code)), e.text);
  }
}

BOOST_AUTO_TEST_CASE(every_truncation_of_a_frame_is_refused_as_truncated) {
  for (const auto k : {tc::message_kind::generate_request, tc::message_kind::train_request, tc::message_kind::peer_table}) {
    const tc::frame f = encoded(sample(k));
    for (std::size_t n = 0; n < f.size(); ++n) {
      BOOST_TEST_CONTEXT(tc::to_string(k) << " cut to " << n << " of " << f.size() << " bytes") {
        const auto d = tc::decode(std::span<const std::byte>(f.data(), n));
        BOOST_REQUIRE(!d.ok());
        BOOST_TEST((d.error().code == tc::codec_errc::truncated));
        BOOST_TEST(mentions(d.error().text, "truncated"), d.error().text);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_short_body_inside_a_consistent_header_is_refused_with_the_field_path_and_offset) {
  // Cut the frame inside its last field and shrink the declared body length to match.
  tc::generate_request r = std::get<tc::generate_request>(sample(tc::message_kind::generate_request));
  r.job.requests.resize(2);
  r.job.requests[1].stop_tokens = {7};
  tc::frame f = encoded(r);
  f.resize(f.size() - 3);  // the last field (requests[1].stop_tokens, one int32) loses 3 bytes
  put_u32(f, 8, static_cast<std::uint32_t>(f.size() - tc::header_bytes));
  const tc::codec_error e = refused(f);
  BOOST_TEST((e.code == tc::codec_errc::truncated));
  BOOST_TEST(e.offset == f.size() - 1);
  BOOST_TEST(e.text == "truncated body: vector<int32> generate_request.job.requests[1].stop_tokens at byte " +
                           std::to_string(f.size() - 1) + " needs 4 bytes, 1 left");
}

BOOST_AUTO_TEST_CASE(a_huge_declared_string_length_is_refused_without_allocating_it) {
  tc::frame f = encoded(tc::shutdown{.reason = "abcd"});
  put_u32(f, 12, 0xFFFFFFF0u);
  allocation_probe probe;
  const auto d = tc::decode(bytes_of(f));
  const std::size_t largest = probe.largest();
  BOOST_REQUIRE(!d.ok());
  BOOST_TEST((d.error().code == tc::codec_errc::truncated));
  BOOST_TEST(d.error().offset == 16u);
  BOOST_TEST(d.error().text == "truncated body: string shutdown.reason at byte 16 needs 4294967280 bytes, 5 left");
  BOOST_TEST(largest < 4096u, "decode allocated " << largest << " bytes");
}

BOOST_AUTO_TEST_CASE(huge_declared_vector_counts_are_refused_without_allocating_them) {
  // Scalar items (logprob_result.excluded_tokens) and struct items (manifest.entries).
  tc::frame scalars = encoded(tc::logprob_result{.step = 1, .result = {.worker = "", .version = 0, .excluded_tokens = {1}, .tokens = 0}});
  put_u32(scalars, 12 + 8 + 4 + 8, 0xFFFFFFF0u);
  tc::frame structs = encoded(tc::manifest{.weight_version = 0, .entries = {{"w", {4}, tandem::plain::dtype::float32}}});
  put_u32(structs, 12 + 8, 0xFFFFFFF0u);
  for (const tc::frame* f : {&scalars, &structs}) {
    allocation_probe probe;
    const auto d = tc::decode(bytes_of(*f));
    const std::size_t largest = probe.largest();
    BOOST_REQUIRE(!d.ok());
    BOOST_TEST((d.error().code == tc::codec_errc::truncated));
    BOOST_TEST(mentions(d.error().text, "needs"), d.error().text);
    BOOST_TEST(largest < 4096u, "decode allocated " << largest << " bytes");
  }
  BOOST_TEST(refused(structs).text ==
             "truncated body: vector<manifest_entry> manifest.entries at byte 24 needs at least 38654705520 bytes for "
             "4294967280 items, 18 left");
}

BOOST_AUTO_TEST_CASE(decoding_never_allocates_much_more_than_the_frame) {
  for (std::uint16_t code = 1; code <= tc::kind_count; ++code) {
    const tc::frame f = encoded(sample(static_cast<tc::message_kind>(code)));
    allocation_probe probe;
    const auto d = tc::decode(bytes_of(f));
    const std::size_t largest = probe.largest();
    BOOST_TEST(d.ok());
    BOOST_TEST(largest <= 10 * f.size(), tc::to_string(static_cast<tc::message_kind>(code)) << ": " << largest);
  }
}

BOOST_AUTO_TEST_CASE(bytes_after_the_body_are_refused_as_trailing) {
  tc::frame f = encoded(sample(tc::message_kind::refit_ack));
  f.push_back(std::byte{0});
  const tc::codec_error outside = refused(f);  // beyond the declared body length
  BOOST_TEST((outside.code == tc::codec_errc::trailing_bytes));
  BOOST_TEST(outside.offset == f.size() - 1);
  BOOST_TEST(mentions(outside.text, "trailing bytes"), outside.text);

  put_u32(f, 8, static_cast<std::uint32_t>(f.size() - tc::header_bytes));  // inside the declared body
  const tc::codec_error inside = refused(f);
  BOOST_TEST((inside.code == tc::codec_errc::trailing_bytes));
  BOOST_TEST(inside.offset == f.size() - 1);
  BOOST_TEST(mentions(inside.text, "trailing bytes: the refit_ack fields end at byte"), inside.text);
}

BOOST_AUTO_TEST_CASE(a_bool_other_than_0_or_1_and_an_unknown_enum_value_are_refused) {
  tc::frame b = encoded(tc::manifest_result{.rank = 1, .ok = true, .message = ""});
  b[12 + 4] = std::byte{2};
  const tc::codec_error eb = refused(b);
  BOOST_TEST((eb.code == tc::codec_errc::bad_value));
  BOOST_TEST(eb.text == "bad value: bool manifest_result.ok at byte 16 is 2, expected 0 or 1");

  tc::frame t = encoded(sample(tc::message_kind::refit_begin));
  t[12 + 8 + 4 + 8] = std::byte{9};
  const tc::codec_error et = refused(t);
  BOOST_TEST((et.code == tc::codec_errc::bad_value));
  BOOST_TEST(et.offset == 32u);
  BOOST_TEST(mentions(et.text, "refit_transport refit_begin.transport at byte 32 is 9"), et.text);

  tc::frame r = encoded(tc::generate_result{.weight_version = 0, .sequences = {{1, {}, {}, tc::finish_reason::length, 0}}});
  r[12 + 8 + 4 + 8 + 4 + 4] = std::byte{2};
  BOOST_TEST(mentions(refused(r).text, "finish_reason generate_result.sequences[0].reason"), refused(r).text);

  // A manifest entry's dtype: the last byte of the frame (entries: count, then name, shape, dtype).
  tc::frame m = encoded(tc::manifest{.weight_version = 0, .entries = {{"w", {4}, tandem::plain::dtype::uint8}}});
  m.back() = std::byte{6};
  const tc::codec_error em = refused(m);
  BOOST_TEST((em.code == tc::codec_errc::bad_value));
  BOOST_TEST(em.text == "bad value: dtype manifest.entries[0].dtype at byte " + std::to_string(m.size() - 1) +
                            " is 6, not a known value");
}

BOOST_AUTO_TEST_CASE(encode_refuses_a_message_above_the_frame_limit_and_accepts_one_exactly_at_it) {
  const tc::shutdown m{.reason = std::string(100, 'x')};
  const std::size_t size = tc::header_bytes + 4 + 100 + 1;
  BOOST_TEST(tc::encode(m, size).ok());
  allocation_probe probe;
  const auto r = tc::encode(m, size - 1);
  const std::size_t largest = probe.largest();
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST((r.error().code == tc::codec_errc::too_large));
  BOOST_TEST(r.error().text == "too large: a shutdown frame of 117 bytes exceeds the frame limit of 116 bytes");
  BOOST_TEST(largest < 1024u, "encode allocated " << largest << " bytes for a refused frame");
  BOOST_TEST(!tc::encode(tc::message{m}, 20).ok());
}

BOOST_AUTO_TEST_CASE(decode_refuses_a_frame_above_the_limit_and_a_body_length_above_the_default_limit) {
  const tc::frame f = encoded(tc::shutdown{.reason = std::string(100, 'x')});
  BOOST_TEST(tc::decode(bytes_of(f), f.size()).ok());
  const tc::codec_error small = refused(f, f.size() - 1);
  BOOST_TEST((small.code == tc::codec_errc::too_large));
  BOOST_TEST(mentions(small.text, "117 bytes exceeds the frame limit of 116"), small.text);

  tc::frame header = encoded(tc::shutdown{});
  put_u32(header, 8, 0xFFFFFFF0u);
  const tc::codec_error big = refused(header);
  BOOST_TEST((big.code == tc::codec_errc::too_large));
  BOOST_TEST(big.offset == 8u);
  BOOST_TEST(mentions(big.text, "body length 4294967280 at byte 8 exceeds the frame limit of " +
                                    std::to_string(tc::max_frame_bytes)), big.text);
}

BOOST_AUTO_TEST_CASE(the_frame_limit_fits_a_uint32_body_length) {
  BOOST_TEST(tc::max_frame_bytes - tc::header_bytes <= std::numeric_limits<std::uint32_t>::max());
  BOOST_TEST(tc::max_frame_bytes >= std::size_t{64} << 20);
}

BOOST_AUTO_TEST_SUITE_END()
