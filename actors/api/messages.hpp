// The message structs of tandem's actor interfaces (DESIGN.md sections 4-5). The jobs and answers
// that also cross processes (generate, logprobs and train jobs, their answers, the manifest) are
// plain/'s structs: one definition, whose field list serves the control-plane codec and CAF's
// inspection alike. The rest are process-local: between processes the only wire format is our
// ZeroMQ codec, so they are allowed into CAF messages without inspect()
// (CAF_ALLOW_UNSAFE_MESSAGE_TYPE). No weight byte is ever in one: refits stream the buckets over
// the refit group (refit_stream.hpp). Each has a short to_string() so CAF's test logs print a
// summary.
//
// Versions: every refit request and ack, generation result and trajectory carries the weight
// version it belongs to; receivers drop or refuse anything of another version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>

#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "gpu/engine/weight_manifest.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/pg_loss.h"
#include "orchestration/rl/dynamic_sampling.h"
#include "plain/generation.h"
#include "plain/saving.h"
#include "plain/training.h"

namespace tandem {

/// A weight version: 0 is the checkpoint both sides start from; every train step (one or more
/// optimizer steps) adds 1.
using weight_version = std::uint64_t;

// ---- generation (rollout workers) -------------------------------------------------------------

/// What a rollout worker generates: every request with the weights of exactly `version`. Its one
/// definition, shared with the control plane, is plain/generation.h's.
using plain::generate_job;

/// One generated sequence (the generator's answer: id, tokens, logprobs, finish reason, the
/// weight version that generated every token) with everything the rest of the step needs.
struct trajectory : gpu::finished_sequence {
  std::uint32_t prompt_index = 0;        ///< the request's rng.prompt
  std::uint32_t sample_index = 0;        ///< the request's rng.sample
  std::uint32_t round = 0;               ///< the request's rng.round: the step's generation round (dynamic sampling)
  std::vector<std::int32_t> prompt;      ///< prompt tokens
  std::string worker;                    ///< the rollout worker that generated it
  /// Set by the driver before scoring: the prompt's position in its prompt set (a dataset's
  /// record order: the line's record, blank lines not counted) and the record's reference
  /// answer, empty when the task has none.
  std::uint64_t record = 0;
  std::string answer;
};

/// A rollout worker's answer to a generate_job: trajectories in the order of the job's requests.
struct generate_result {
  std::string worker;
  weight_version version = 0;
  std::vector<trajectory> trajectories;
};

// ---- scoring (environments) -------------------------------------------------------------------

/// Trajectories to score, in any order; the answer keeps that order.
struct score_job {
  std::uint32_t step = 0;  ///< RL step, for environments whose tasks depend on it
  std::vector<trajectory> trajectories;
};

/// An environment's verdict on one trajectory so far. Single-turn environments set done = true
/// and no observation; a multi-turn environment returns the next observation (a tool result, the
/// next user turn) to append before generating again.
struct env_feedback {
  double reward = 0;
  bool done = true;
  std::optional<std::vector<std::int32_t>> next_observation;  ///< tokens; only when !done
};

/// One env_feedback per trajectory of the score_job, same order.
struct score_result {
  std::vector<env_feedback> feedback;
};

// ---- training (policy workers) ----------------------------------------------------------------

/// A policy rank's jobs and answers: one definition each, shared with the control plane and the
/// train engines, in plain/training.h. The rank keeps the sequences, lp_gen and the logprobs it
/// computes for the step's train job, so per-token data travels to a rank once and never back
/// (DESIGN.md section 9). The loss settings are the policy worker's (policy_worker_config), from
/// the recipe, as the driver's are.
using plain::logprobs_job;
using plain::logprobs_result;
using plain::optimizer_share;
using plain::train_job;
using plain::train_objective;
using plain::train_report;
using plain::load_job;
using plain::load_report;
using plain::save_job;
using plain::save_part;
using plain::save_report;

/// The policy's refit manifest, sent once at the handshake.
struct manifest_reply {
  std::string worker;
  weight_version version = 0;
  gpu::weight_manifest manifest;
};

// ---- refit ------------------------------------------------------------------------------------

/// The refit integrity checksum: the chunked XXH3-64 of a bucket's bytes (gpu/core/chunked_hash.h
/// defines it bit for bit), as the fake engines check it. It travels on the refit stream's closing
/// (refit_stream.hpp); a change to it is a control protocol version bump.
std::uint64_t bucket_checksum(std::span<const std::byte> bytes);

/// The policy's manifest for a rollout worker to check against its own layout, and the bucket
/// size both sides cut it with.
struct manifest_check {
  gpu::weight_manifest manifest;
  std::int64_t bucket_bytes = 0;  ///< > 0
};

/// A rollout worker's acceptance of the manifest.
struct manifest_accepted {
  std::string worker;
  weight_version version = 0;  ///< its live version
  std::size_t bucket_count = 0;
  std::int64_t total_bytes = 0;
};

/// A refit streamed over the refit group: the policy root broadcasts every bucket of `version` to
/// the rollout workers of its refit group (actors/api/refit_stream.hpp).
struct stream_job {
  weight_version version = 0;
  std::size_t bucket_count = 0;   ///< the plan's bucket count (both sides check it)
  std::int64_t bucket_bytes = 0;  ///< > 0
  bool checksums = false;         ///< each bucket travels with its bucket_checksum
};

/// What the policy root sent.
struct stream_report {
  std::string worker;
  weight_version version = 0;
  std::size_t buckets = 0;
  std::int64_t bytes = 0;  ///< payload bytes broadcast once
};

/// Which step of a refit an ack confirms.
enum class refit_stage : std::uint8_t {
  stream,  ///< every bucket of `version` received and staged (or the stream's failure, stream_result)
  commit,  ///< `version` is live
  bump,    ///< colocated: `version` is live over the shared weights
};

/// How a stream ended on a rollout worker, carried by its stream ack: the refit coordinator learns
/// a failed stream and the checksum results from the ack itself, with no reply per bucket.
struct stream_result {
  bool aborted = false;                        ///< the stream failed here and the update was dropped (the ack's error says why)
  std::optional<std::size_t> failed_bucket;    ///< when aborted: the first bucket that failed (none: before or after every bucket)
  bool checksums = false;                      ///< the buckets' checksums were compared
  std::size_t checksums_matched = 0;           ///< buckets whose checksum matched their bytes
  std::optional<std::size_t> checksum_mismatch;  ///< the first bucket whose checksum did not match (corrupted in transit)
};

/// A rollout worker's confirmation of one refit stage. Acks come back as replies, or (from remote
/// workers, through the bridge) as messages to the refit coordinator; an ack of another version
/// or stage than the one awaited is dropped and counted.
struct refit_ack {
  std::string worker;
  weight_version version = 0;
  refit_stage stage = refit_stage::stream;
  std::string error;     ///< empty: ok; else why the stage failed on that worker (its update is dropped)
  stream_result stream;  ///< stage == stream: the stream's outcome
};

/// How refits reach the rollout workers.
enum class refit_mode : std::uint8_t {
  colocated,  ///< same process and device: the rollout engine shares the trainer's weights; a version bump
  dedicated,  ///< separate rollout workers: the policy root streams every bucket to them over the refit group
};

/// The refit coordinator's answer to the handshake.
struct handshake_report {
  refit_mode mode = refit_mode::dedicated;
  weight_version version = 0;         ///< live on every rollout worker
  std::vector<std::string> rollout_workers;
  std::size_t bucket_count = 0;
  std::int64_t bucket_bytes = 0;
  std::int64_t total_bytes = 0;
};

/// What one refit did.
struct refit_report {
  refit_mode mode = refit_mode::dedicated;
  weight_version version = 0;     ///< now live on every rollout worker
  std::size_t rollout_workers = 0;
  std::size_t buckets = 0;        ///< buckets streamed (0 colocated)
  std::int64_t bytes = 0;         ///< bytes the policy root broadcast once (each rollout worker received them all)
  bool checksums = false;         ///< every rollout worker matched every bucket's checksum
  std::size_t dropped_acks = 0;   ///< acks of another version or stage, ignored during this refit
};

// ---- the RL step (driver) ---------------------------------------------------------------------

/// What one RL step did, for logs, metrics and tests.
/// Where a step's time went, in seconds, phase by phase (the driver's states).
struct step_phase_seconds {
  double generation = 0;  ///< generating: every rollout worker answered
  double scoring = 0;     ///< the environment's rewards, then the advantages
  double logprobs = 0;    ///< computing_logprobs: lp_prev from every policy rank
  double training = 0;    ///< every policy rank stepped
  double refit = 0;       ///< the new version live on every rollout worker
  double waiting = 0;     ///< after training, for the next step's batch generated ahead (one-step off-policy)
};

/// One event of the driver's trace, numbered in the order the driver saw them, across steps.
struct driver_event {
  std::uint64_t sequence = 0;
  std::uint32_t step = 0;  ///< the step it belongs to (generation ahead belongs to the next step)
  std::string what;        ///< "generation started", "generation finished", "training started", ...
};

struct step_report {
  std::uint32_t step = 0;
  /// A step of the supervised warm-up: its trajectories are the examples (target tokens as
  /// generated tokens, no logprobs), trained on with the cross-entropy; no rewards, no advantages.
  bool supervised = false;
  weight_version generated_with = 0;      ///< the version every trajectory carries
  weight_version trained_to = 0;          ///< the version after the optimizer step, live after the refit
  std::vector<trajectory> trajectories;   ///< in request-id order
  std::vector<double> raw_rewards;        ///< per trajectory: the environment's
  std::vector<double> rewards;            ///< per trajectory: scaled and shaped (what the advantages use)
  std::vector<double> advantages;         ///< per trajectory, after normalisation and clipping
  double reward_mean = 0;                 ///< of `rewards`: the samples trained on (filtered_reward)
  double generated_reward_mean = 0;       ///< of every sample generated (train/reward; = reward_mean without dynamic sampling)
  rl::dynamic_sampling_metrics dynamic_sampling;  ///< rounds generated, valid samples discarded (0 without dynamic sampling)
  std::int64_t filtered_samples = 0;      ///< trajectories the loss leaves out (overlong filtering)
  gpu::optimizer_result optimizer;        ///< policy rank 0's last update: gradient norm, learning rate
  double grad_norm_mean = 0;              ///< over the step's optimizer steps (the gradient norm before clipping)
  double loss = 0;                        ///< the mean over the step's optimizer steps of each one's global loss
  std::size_t optimizer_steps = 0;        ///< optimizer steps the step took (train_global_batch_size)
  std::vector<driver_event> events;       ///< the trace of this step's run (and of generation ahead for the next)
  std::int64_t excluded_tokens = 0;       ///< generated tokens left out of the loss: the trainer's masks exclude them (lp_prev -inf)
  step_phase_seconds phase_seconds;
  std::size_t unfinished_episodes = 0;    ///< trajectories whose environment asked for another turn (single-turn for now)
  std::int64_t train_tokens = 0;          ///< masked tokens trained on
  std::size_t micro_batches = 0;          ///< over every policy rank
  gpu::ops::pg_loss_metrics metrics;           ///< merged over every rank
  std::vector<std::uint64_t> weights_digests;  ///< per policy rank after the step (0: none offered)
  refit_report refit;
  /// Colocated members' device turns since the last step's report (plain::device_turn_figures),
  /// merged over the policy ranks; all zero where no member hosts both engines.
  plain::device_turn_figures turns;
};

/// Where the driver stands between steps (snapshot_atom): all a resumed run's driver needs to go
/// on exactly as the uninterrupted one would. Randomness is counter-based (seed, step, round,
/// prompt, sample), so there is no generator state to keep, and a dynamic-sampling cache never
/// outlives its step (the surplus of a step's last round is dropped), so none is in flight here.
struct driver_snapshot {
  weight_version live = 0;         ///< live on every worker
  std::uint32_t next_step = 0;     ///< the next step's number (0-based, both phases)
  std::uint64_t next_prompt = 0;   ///< training prompts drawn so far (the epochs' order is seeded)
  std::uint64_t next_example = 0;  ///< warm-up examples drawn so far
  std::uint64_t next_event = 0;    ///< the next trace event's number (metrics.jsonl "events")
  /// One-step off-policy generation: the next step's batch, generated during the last step with
  /// the version before `live` (the trajectories in flight).
  struct batch_ahead {
    std::uint32_t for_step = 0;
    weight_version version = 0;
    std::vector<std::size_t> records;  ///< its prompts' indices in the prompt set
    std::vector<trajectory> trajectories;
    double seconds = 0;                ///< how long its generation took
  };
  std::optional<batch_ahead> ahead;
};

// ---- validation (actors/driver/validation.hpp) ------------------------------------------------

/// One validation prompt's greedy response and its raw reward.
struct validation_sample {
  std::uint32_t prompt_index = 0;        ///< in the validation set
  std::vector<std::int32_t> prompt;      ///< prompt tokens
  std::vector<std::int32_t> tokens;      ///< generated tokens (the prompt excluded)
  gpu::finish_reason reason = gpu::finish_reason::length;
  double reward = 0;                     ///< the environment's, unscaled and unshaped
  std::string worker;                    ///< the rollout worker that generated it
};

/// What one validation pass found: NeMo-RL's validation/accuracy and validation/avg_length.
struct validation_report {
  std::uint32_t step = 0;            ///< the steps done before the pass (0: before the first)
  weight_version version = 0;        ///< the version every response was generated with
  std::size_t prompts = 0;           ///< validation prompts, each generated once
  std::size_t rounds = 0;            ///< generation rounds of at most batch_size prompts
  double accuracy = 0;               ///< mean raw reward
  double avg_length = 0;             ///< mean generated tokens per response
  double seconds = 0;                ///< the whole pass
  std::vector<validation_sample> samples;  ///< in prompt order
};

std::string to_string(const generate_job& x);
std::string to_string(const trajectory& x);
std::string to_string(const generate_result& x);
std::string to_string(const score_job& x);
std::string to_string(const env_feedback& x);
std::string to_string(const score_result& x);
std::string to_string(const logprobs_job& x);
std::string to_string(const logprobs_result& x);
std::string to_string(const train_job& x);
std::string to_string(const train_report& x);
std::string to_string(const save_job& x);
std::string to_string(const save_report& x);
std::string to_string(const load_job& x);
std::string to_string(const load_report& x);
std::string to_string(const manifest_reply& x);
std::string to_string(const stream_job& x);
std::string to_string(const stream_report& x);
std::string to_string(const manifest_check& x);
std::string to_string(const manifest_accepted& x);
std::string to_string(refit_stage x);
std::string to_string(const stream_result& x);
std::string to_string(const refit_ack& x);
std::string to_string(refit_mode x);
std::string to_string(const handshake_report& x);
std::string to_string(const refit_report& x);
std::string to_string(const step_report& x);
std::string to_string(const validation_sample& x);
std::string to_string(const validation_report& x);

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::trajectory)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::generate_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::score_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::env_feedback)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::score_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::manifest_reply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::manifest_check)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::manifest_accepted)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::refit_ack)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::handshake_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::refit_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::step_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::driver_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::stream_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::stream_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::validation_sample)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::validation_report)
