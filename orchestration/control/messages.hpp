// The control-plane messages (DESIGN.md section 5): a closed enum of every kind that travels
// between the controller's ROUTER socket and the members' DEALER sockets, the protocol version,
// and one plain-data struct per kind. Nothing process-local (pointers, handles, CAF types) appears
// here; weight bytes and gradients never do either (they travel member to member on the data
// plane). The wire format lives in codec.hpp.
//
// A member's life, as the messages see it:
//
//   member                                   controller
//     hello ------------------------------------>          (first message)
//     <------------------------------------ welcome        (roles, ranks, recipe)
//     data_endpoint ---------------------------->          (data-plane socket bound)
//     <--------------------------------- peer_table        (once every member reported)
//     manifest --------------------------------->          (policy rank 0, once)
//     <----------------------------- manifest_check        (rollout workers)
//     manifest_result -------------------------->
//     per step: generate_request/result, logprob_request/result, train_request/result,
//               refit_begin/refit_ack, then refit_commit/refit_ack or refit_abort/refit_ack
//     heartbeat <-------------------------------> heartbeat   (both ways, all the time)
//     error <-----------------------------------> error       (either way)
//     <----------------------------------- shutdown
//     goodbye ---------------------------------->          (last message)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "plain/generation.h"
#include "plain/manifest.h"
#include "plain/saving.h"
#include "plain/training.h"

namespace tandem::control {

/// The protocol this build speaks. Bump it on any change to a kind's fields or meaning; peers of
/// different versions refuse each other's frames (codec.hpp). Version 4: refit bucket checksums
/// (refit_begin.checksums) and weights digests (train_result.weights_digest) are the chunked
/// XXH3-64 of gpu/core/chunked_hash.h, no longer FNV-1a 64, so a version-3 peer would report
/// checksum mismatches and differing digests instead of being refused. Version 5: the straight
/// train step (logprob_request carries each trajectory once with the generator's logprobs and
/// the rank keeps them; logprob_result and train_request carry per-sequence values only). Version 6:
/// the jobs and answers are plain/'s structs, the actors' own (a generate request carries each
/// request whole; a train result its metrics as fields, not named values; a manifest entry's dtype
/// is checked as an enum). Version 7: a train request names its objective (the policy-gradient
/// loss or the supervised warm-up's cross-entropy). Version 8: save_request and save_result (a
/// policy rank saves its weights where the controller says). Version 9: a save names its part
/// (the engine's state, or a data-parallel rank's attestation of a step checkpoint) and answers
/// the weights digest; load_request and load_result (a resumed run's ranks load a checkpoint).
/// Version 10: shutdown says whether the run failed (the members of a failed run exit with 1).
/// Version 11: a train result carries the colocated member's device turns (plain::device_turn_figures).
inline constexpr std::uint16_t protocol_version = 11;

/// Every message kind, closed: a frame of any other kind is refused. Values are the wire codes
/// (0 is never sent). Each line: sender -> receiver, when; the reply it expects.
enum class message_kind : std::uint16_t {
  hello = 1,             ///< member -> controller, first message after connecting; reply: welcome (or error)
  welcome = 2,           ///< controller -> member, answering hello; reply: data_endpoint
  heartbeat = 3,         ///< both ways, every heartbeat interval; no reply (silence past the timeout = dead)
  data_endpoint = 4,     ///< member -> controller, once its data-plane socket is bound; reply: peer_table
  peer_table = 5,        ///< controller -> every member, once all data endpoints are known; no reply
  manifest = 6,          ///< policy worker (data-parallel rank 0) -> controller, once at start-up; no reply
  manifest_check = 7,    ///< controller -> every rollout worker, forwarding the manifest; reply: manifest_result
  manifest_result = 8,   ///< rollout worker -> controller, answering manifest_check; no reply
  generate_request = 9,  ///< controller -> rollout worker, each generation round; reply: generate_result
  generate_result = 10,  ///< rollout worker -> controller, the finished sequences of a request; no reply
  logprob_request = 11,  ///< controller -> policy worker, each step before training; reply: logprob_result
  logprob_result = 12,   ///< policy worker -> controller, answering logprob_request; no reply
  train_request = 13,    ///< controller -> every policy worker, each step; reply: train_result
  train_result = 14,     ///< policy worker -> controller, after the optimizer step; no reply
  refit_begin = 15,      ///< controller -> policy and rollout workers, after each train step; reply: refit_ack
  refit_ack = 16,        ///< member -> controller, once its side of a refit stage is done or failed; no reply
  refit_commit = 17,     ///< controller -> rollout workers, once every one staged the update; reply: refit_ack
  refit_abort = 18,      ///< controller -> rollout workers, when any side of the refit failed; reply: refit_ack
  error = 19,            ///< either way, whenever a request fails or a frame is refused; no reply
  shutdown = 20,         ///< controller -> member, at the end of a run or on a fatal error; reply: goodbye
  goodbye = 21,          ///< member -> controller, last message before the member exits; no reply
  save_request = 22,     ///< controller -> policy worker (data-parallel rank 0), at the end of a run; reply: save_result
  save_result = 23,      ///< policy worker -> controller, once the weights are saved; no reply
  load_request = 24,     ///< controller -> every policy worker, when a run resumes from a checkpoint; reply: load_result
  load_result = 25,      ///< policy worker -> controller, once the checkpoint is loaded; no reply
};

/// Number of kinds; codes run from 1 to kind_count.
inline constexpr std::uint16_t kind_count = 25;

/// The kind's name as written in the enum ("generate_request"); "unknown" for other values.
constexpr std::string_view to_string(message_kind k) {
  switch (k) {
    case message_kind::hello: return "hello";
    case message_kind::welcome: return "welcome";
    case message_kind::heartbeat: return "heartbeat";
    case message_kind::data_endpoint: return "data_endpoint";
    case message_kind::peer_table: return "peer_table";
    case message_kind::manifest: return "manifest";
    case message_kind::manifest_check: return "manifest_check";
    case message_kind::manifest_result: return "manifest_result";
    case message_kind::generate_request: return "generate_request";
    case message_kind::generate_result: return "generate_result";
    case message_kind::logprob_request: return "logprob_request";
    case message_kind::logprob_result: return "logprob_result";
    case message_kind::train_request: return "train_request";
    case message_kind::train_result: return "train_result";
    case message_kind::refit_begin: return "refit_begin";
    case message_kind::refit_ack: return "refit_ack";
    case message_kind::refit_commit: return "refit_commit";
    case message_kind::refit_abort: return "refit_abort";
    case message_kind::error: return "error";
    case message_kind::shutdown: return "shutdown";
    case message_kind::goodbye: return "goodbye";
    case message_kind::save_request: return "save_request";
    case message_kind::save_result: return "save_result";
    case message_kind::load_request: return "load_request";
    case message_kind::load_result: return "load_result";
  }
  return "unknown";
}

// ---- nested plain structs -------------------------------------------------------------------

/// Which actors a member hosts.
struct roles {
  bool policy = false;   ///< a policy_worker actor (training)
  bool rollout = false;  ///< a rollout_worker actor (generation)
  bool operator==(const roles&) const = default;
};

/// One member's data-plane addresses, one per group it belongs to ("" where it is no member).
struct peer {
  std::int32_t rank = 0;
  std::string data_parallel_endpoint;  ///< "tcp://10.0.0.3:41234": the ring of the policy ranks
  std::string refit_endpoint;          ///< the refit group: the policy root and the rollout workers
  bool operator==(const peer&) const = default;
};

/// The structs the actors exchange that also cross processes: one definition each, whose field
/// list the codec walks (plain/). A tensor of the refit manifest; a generate job and the
/// sequences it finished; a policy rank's logprobs and train jobs and their answers.
using plain::finish_reason;
using plain::finished_sequence;
using plain::generate_job;
using plain::logprobs_job;
using plain::logprobs_result;
using plain::manifest_entry;
using plain::packed_sequences;
using plain::rng_coordinates;
using plain::sampling_params;
using plain::load_job;
using plain::load_report;
using plain::save_job;
using plain::save_report;
using plain::train_job;
using plain::train_report;

/// How a refit moves the weights (DESIGN.md section 4).
enum class refit_transport : std::uint8_t {
  colocated_bump = 0,  ///< same process and device: the rollout engine reads the trainer's weights in place
  broadcast = 1,       ///< buckets broadcast from the root policy rank to the rollout ranks
};

/// Which part of a refit a refit_ack answers.
enum class refit_stage : std::uint8_t {
  sent = 0,       ///< policy root: every bucket broadcast
  staged = 1,     ///< rollout worker: every bucket received, checked and staged (not live yet)
  committed = 2,  ///< rollout worker: the staged version is live
  aborted = 3,    ///< rollout worker: the update is dropped; live_version stays live
  bumped = 4,     ///< colocated rollout worker: the version is live over the shared weights
};

// ---- one struct per kind, in enum order -----------------------------------------------------

/// member -> controller, first message. Reply: welcome.
struct hello {
  static constexpr message_kind kind = message_kind::hello;
  std::int32_t rank = 0;        ///< member rank in the job
  std::int32_t world_size = 0;  ///< members in the job, as the member was told
  std::int64_t pid = 0;
  std::string hostname;
  std::string device;           ///< "cpu:0", "cuda:3"
  std::uint16_t version = protocol_version;  ///< echo of the member's protocol version
  roles offered;                ///< the actors this member can host
  bool operator==(const hello&) const = default;
};

/// controller -> member, answering hello. Reply: data_endpoint.
struct welcome {
  static constexpr message_kind kind = message_kind::welcome;
  roles assigned;
  std::int32_t data_parallel_rank = -1;  ///< -1: no policy actor
  std::int32_t data_parallel_size = 0;
  std::int32_t rollout_rank = -1;        ///< -1: no rollout actor
  std::int32_t rollout_size = 0;
  std::string recipe_yaml;               ///< the resolved recipe
  std::string run_id;
  std::uint32_t heartbeat_interval_ms = 0;
  std::uint32_t heartbeat_timeout_ms = 0;
  bool operator==(const welcome&) const = default;
};

/// Both ways, periodically. No reply.
struct heartbeat {
  static constexpr message_kind kind = message_kind::heartbeat;
  std::int32_t sender_rank = 0;  ///< -1: the controller
  std::uint64_t sequence = 0;    ///< counts up from 0 per sender
  bool operator==(const heartbeat&) const = default;
};

/// member -> controller, once its data-plane socket is bound. Reply: peer_table.
struct data_endpoint {
  static constexpr message_kind kind = message_kind::data_endpoint;
  std::int32_t rank = 0;
  std::string data_parallel_endpoint;      ///< "tcp://10.0.0.3:41234"; "" unless a policy rank
  std::string refit_endpoint;              ///< "" unless the policy root or a rollout worker of a dedicated run
  std::vector<std::byte> nccl_unique_id;   ///< GPU runs, from the root rank; empty otherwise
  bool operator==(const data_endpoint&) const = default;
};

/// controller -> every member, once every data endpoint is known. No reply.
struct peer_table {
  static constexpr message_kind kind = message_kind::peer_table;
  std::vector<peer> peers;                 ///< every member, by rank
  std::vector<std::int32_t> ring;          ///< member ranks of the data-parallel policy ranks, in ring order
  std::vector<std::int32_t> refit_group;   ///< member ranks of the refit group, the policy root first; empty when colocated
  std::vector<std::byte> nccl_unique_id;   ///< GPU runs; empty otherwise
  bool operator==(const peer_table&) const = default;
};

/// policy worker (data-parallel rank 0) -> controller, once. No reply.
struct manifest {
  static constexpr message_kind kind = message_kind::manifest;
  std::uint64_t weight_version = 0;     ///< the policy's version at start-up
  std::vector<manifest_entry> entries;  ///< in slab order
  bool operator==(const manifest&) const = default;
};

/// controller -> every rollout worker, the policy's manifest. Reply: manifest_result.
struct manifest_check {
  static constexpr message_kind kind = message_kind::manifest_check;
  std::uint64_t bucket_bytes = 0;       ///< the refit bucket size both sides cut the manifest with
  std::vector<manifest_entry> entries;
  bool operator==(const manifest_check&) const = default;
};

/// rollout worker -> controller, answering manifest_check. No reply.
struct manifest_result {
  static constexpr message_kind kind = message_kind::manifest_result;
  std::int32_t rank = 0;
  bool ok = false;
  std::string message;               ///< the first difference when not ok
  std::uint64_t weight_version = 0;  ///< the member's live version
  std::uint64_t bucket_count = 0;    ///< of its bucket plan
  std::uint64_t total_bytes = 0;
  bool operator==(const manifest_result&) const = default;
};

/// controller -> rollout worker, a generation round. Reply: generate_result.
struct generate_request {
  static constexpr message_kind kind = message_kind::generate_request;
  generate_job job;  ///< every request, with the weights of job.version
  bool operator==(const generate_request&) const = default;
};

/// rollout worker -> controller, answering generate_request. No reply.
/// The sequences only: the controller kept the job, so prompts do not travel back (the proxy
/// assembles the trajectories from both, as a local rollout worker does).
struct generate_result {
  static constexpr message_kind kind = message_kind::generate_result;
  std::uint64_t weight_version = 0;  ///< the live version that generated every sequence
  std::vector<finished_sequence> sequences;  ///< one per request of the job, in any order
  bool operator==(const generate_result&) const = default;
};

/// controller -> policy worker, its trajectories of a step for the logprob pass; the rank keeps
/// them (with the logprobs it computes) for the step's train_request. Reply: logprob_result.
struct logprob_request {
  static constexpr message_kind kind = message_kind::logprob_request;
  std::uint64_t step = 0;  ///< the request's number (echoed)
  logprobs_job job;
  bool operator==(const logprob_request&) const = default;
};

/// policy worker -> controller, answering logprob_request: nothing per token. No reply.
struct logprob_result {
  static constexpr message_kind kind = message_kind::logprob_result;
  std::uint64_t step = 0;  ///< the request's
  logprobs_result result;
  bool operator==(const logprob_result&) const = default;
};

/// controller -> every policy worker, its part of a train step: per-sequence values only (the
/// loss settings come from the recipe on both ends). Reply: train_result.
struct train_request {
  static constexpr message_kind kind = message_kind::train_request;
  std::uint64_t step = 0;  ///< the request's number (echoed)
  train_job job;
  bool operator==(const train_request&) const = default;
};

/// policy worker -> controller, after the train step. No reply.
struct train_result {
  static constexpr message_kind kind = message_kind::train_result;
  std::uint64_t step = 0;  ///< the request's
  train_report report;     ///< with the weights digest after the step
  bool operator==(const train_result&) const = default;
};

/// controller -> policy and rollout workers, after a train step. Reply: refit_ack.
struct refit_begin {
  static constexpr message_kind kind = message_kind::refit_begin;
  std::uint64_t weight_version = 0;
  std::uint32_t bucket_count = 0;
  std::uint64_t bucket_bytes = 0;
  refit_transport transport = refit_transport::broadcast;
  std::int32_t root_rank = 0;  ///< the member rank that sends the buckets (-1: the refit group's first, per the peer table)
  bool checksums = false;      ///< every bucket travels with its checksum (debug integrity)
  bool operator==(const refit_begin&) const = default;
};

/// member -> controller, its side of a refit stage done or failed. No reply; an old version is ignored.
/// A rollout worker's staged ack carries its stream's outcome, so the controller learns an
/// aborted stream and the checksum results from this one message, with nothing per bucket.
struct refit_ack {
  static constexpr message_kind kind = message_kind::refit_ack;
  std::int32_t rank = 0;
  std::uint64_t weight_version = 0;  ///< the refit's version
  refit_stage stage = refit_stage::staged;
  bool ok = false;
  std::string error;                 ///< why, when not ok (the previous version stays live)
  std::uint16_t error_code = 0;      ///< a tandem_errc value when not ok
  std::uint64_t live_version = 0;    ///< the member's live version after this stage
  bool aborted = false;              ///< staged: the stream ran and failed here, the update was dropped (not ok; error says why)
  std::int64_t failed_bucket = -1;   ///< staged, aborted: the first bucket that failed; -1: none (the opening or the closing)
  bool checksums = false;            ///< staged: the buckets' checksums were compared
  std::uint64_t checksums_matched = 0;  ///< staged: buckets whose checksum matched their bytes
  std::int64_t checksum_mismatch = -1;  ///< staged: the first bucket whose checksum did not match; -1: none
  bool operator==(const refit_ack&) const = default;
};

/// controller -> every rollout worker, once every one staged `weight_version`. Reply: refit_ack (committed).
struct refit_commit {
  static constexpr message_kind kind = message_kind::refit_commit;
  std::uint64_t weight_version = 0;
  bool operator==(const refit_commit&) const = default;
};

/// controller -> every rollout worker, when a refit failed anywhere. Reply: refit_ack (aborted).
struct refit_abort {
  static constexpr message_kind kind = message_kind::refit_abort;
  std::uint64_t weight_version = 0;
  bool operator==(const refit_abort&) const = default;
};

/// Either way: a request failed or a frame was refused. No reply.
struct error {
  static constexpr message_kind kind = message_kind::error;
  std::uint16_t code = 0;     ///< a tandem_errc value (actors/api/errors.hpp)
  std::string text;
  std::int32_t rank = -1;     ///< the member it concerns; -1: the controller
  std::uint16_t request = 0;  ///< the message_kind code of the request that failed; 0: none
  bool operator==(const error&) const = default;
};

/// controller -> member, end of the run or a fatal error. Reply: goodbye.
struct shutdown {
  static constexpr message_kind kind = message_kind::shutdown;
  std::string reason;
  bool failed = false;  ///< the run failed: the member exits with status 1, not 0
  bool operator==(const shutdown&) const = default;
};

/// member -> controller, last message before exiting. No reply.
struct goodbye {
  static constexpr message_kind kind = message_kind::goodbye;
  std::int32_t rank = 0;
  std::string reason;
  bool operator==(const goodbye&) const = default;
};

/// controller -> policy worker, save the weights (plain/saving.h). Reply: save_result.
struct save_request {
  static constexpr message_kind kind = message_kind::save_request;
  std::uint64_t step = 0;  ///< the request's number (echoed)
  save_job job;
  bool operator==(const save_request&) const = default;
};

/// policy worker -> controller, the weights are saved, complete. No reply.
struct save_result {
  static constexpr message_kind kind = message_kind::save_result;
  std::uint64_t step = 0;  ///< the request's
  save_report report;
  bool operator==(const save_result&) const = default;
};

/// controller -> policy worker, load a checkpoint (plain/saving.h). Reply: load_result.
struct load_request {
  static constexpr message_kind kind = message_kind::load_request;
  std::uint64_t step = 0;  ///< the request's number (echoed)
  load_job job;
  bool operator==(const load_request&) const = default;
};

/// policy worker -> controller, the checkpoint is loaded. No reply.
struct load_result {
  static constexpr message_kind kind = message_kind::load_result;
  std::uint64_t step = 0;  ///< the request's
  load_report report;
  bool operator==(const load_result&) const = default;
};

/// Any message. Alternative i has kind code i + 1 (checked below).
using message = std::variant<hello, welcome, heartbeat, data_endpoint, peer_table, manifest, manifest_check,
                             manifest_result, generate_request, generate_result, logprob_request, logprob_result,
                             train_request, train_result, refit_begin, refit_ack, refit_commit, refit_abort, error,
                             shutdown, goodbye, save_request, save_result, load_request, load_result>;

/// The kind of a message.
inline message_kind kind_of(const message& m) {
  return std::visit([](const auto& alternative) { return std::decay_t<decltype(alternative)>::kind; }, m);
}

namespace detail {
template <std::size_t... i>
constexpr bool kinds_in_order(std::index_sequence<i...>) {
  return ((static_cast<std::size_t>(std::variant_alternative_t<i, message>::kind) == i + 1) && ...);
}
}  // namespace detail
static_assert(std::variant_size_v<message> == kind_count, "one struct per kind");
static_assert(detail::kinds_in_order(std::make_index_sequence<kind_count>{}),
              "message alternatives follow the enum order");

}  // namespace tandem::control
