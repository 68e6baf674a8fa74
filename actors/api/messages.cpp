// Summaries of the actor messages for logs and CAF's test output, and the bucket checksum.
#include "actors/api/messages.hpp"

#include <cstdio>

#include "gpu/core/chunked_hash.h"

namespace tandem {
namespace {

std::string v(weight_version x) { return "v" + std::to_string(x); }

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

}  // namespace

std::uint64_t bucket_checksum(std::span<const std::byte> bytes) { return gpu::chunked_xxh3(bytes); }

std::string to_string(const generate_job& x) {
  return "generate_job(" + v(x.version) + ", " + std::to_string(x.requests.size()) + " requests)";
}

std::string to_string(const trajectory& x) {
  return "trajectory(id " + std::to_string(x.id) + ", " + v(x.weight_version) + ", " + std::to_string(x.prompt.size()) +
         "+" + std::to_string(x.tokens.size()) + " tokens, " + x.worker + ")";
}

std::string to_string(const generate_result& x) {
  return "generate_result(" + x.worker + ", " + v(x.version) + ", " + std::to_string(x.trajectories.size()) +
         " trajectories)";
}

std::string to_string(const score_job& x) {
  return "score_job(step " + std::to_string(x.step) + ", " + std::to_string(x.trajectories.size()) + " trajectories)";
}

std::string to_string(const env_feedback& x) {
  std::string out = "env_feedback(reward " + fmt(x.reward);
  if (!x.done) out += ", next observation of " + std::to_string(x.next_observation ? x.next_observation->size() : 0) + " tokens";
  return out + ")";
}

std::string to_string(const score_result& x) {
  return "score_result(" + std::to_string(x.feedback.size()) + " rewards)";
}

std::string to_string(const logprobs_job& x) {
  const std::size_t n = x.sequences.offsets.empty() ? 0 : x.sequences.offsets.size() - 1;
  return "logprobs_job(step " + std::to_string(x.step) + ", " + v(x.version) + ", " + std::to_string(n) + " sequences, " +
         std::to_string(x.sequences.tokens.size()) + " tokens" + (x.reference ? ", with reference" : "") + ")";
}

std::string to_string(const logprobs_result& x) {
  return "logprobs_result(" + x.worker + ", " + v(x.version) + ", " + std::to_string(x.tokens) + " tokens)";
}

std::string to_string(const train_job& x) {
  return "train_job(step " + std::to_string(x.step) + ", " + v(x.version) + ", " + std::to_string(x.advantages.size()) +
         " sequences, " + std::to_string(x.optimizer_steps.size()) + " optimizer steps)";
}

std::string to_string(const train_report& x) {
  return "train_report(" + x.worker + ", " + v(x.version) + ", " + std::to_string(x.micro_batches) + " micro-batches, " +
         std::to_string(x.optimizer_steps) + " optimizer steps, loss " + fmt(x.loss) + ")";
}

std::string to_string(const save_job& x) {
  return "save_job(" + v(x.version) + ", " + x.directory +
         (x.part == save_part::attestation ? ", attestation)" : ", engine state)");
}

std::string to_string(const save_report& x) {
  return "save_report(" + x.worker + ", " + v(x.version) + ", " + x.directory + ")";
}

std::string to_string(const load_job& x) { return "load_job(" + v(x.version) + ", " + x.directory + ")"; }

std::string to_string(const load_report& x) { return "load_report(" + x.worker + ", " + v(x.version) + ")"; }

std::string to_string(const manifest_reply& x) {
  return "manifest_reply(" + x.worker + ", " + v(x.version) + ", " + std::to_string(x.manifest.size()) + " tensors)";
}

std::string to_string(const stream_job& x) {
  return "stream_job(" + v(x.version) + ", " + std::to_string(x.bucket_count) + " buckets of " +
         std::to_string(x.bucket_bytes) + " bytes" + (x.checksums ? ", checksums" : "") + ")";
}

std::string to_string(const stream_report& x) {
  return "stream_report(" + x.worker + ", " + v(x.version) + ", " + std::to_string(x.buckets) + " buckets, " +
         std::to_string(x.bytes) + " bytes)";
}

std::string to_string(const manifest_check& x) {
  return "manifest_check(" + std::to_string(x.manifest.size()) + " tensors, buckets of " +
         std::to_string(x.bucket_bytes) + " bytes)";
}

std::string to_string(const manifest_accepted& x) {
  return "manifest_accepted(" + x.worker + ", " + v(x.version) + ", " + std::to_string(x.bucket_count) + " buckets)";
}

std::string to_string(refit_stage x) {
  switch (x) {
    case refit_stage::stream: return "stream";
    case refit_stage::commit: return "commit";
    case refit_stage::bump: return "bump";
  }
  return "unknown";
}

std::string to_string(const stream_result& x) {
  std::string out = x.aborted ? "aborted" : "staged";
  if (x.aborted && x.failed_bucket) out += " at bucket " + std::to_string(*x.failed_bucket);
  if (x.checksums) {
    out += ", " + std::to_string(x.checksums_matched) + " checksums matched";
    if (x.checksum_mismatch) out += ", bucket " + std::to_string(*x.checksum_mismatch) + " mismatched";
  }
  return out;
}

std::string to_string(const refit_ack& x) {
  std::string out = "refit_ack(" + x.worker + ", " + v(x.version) + ", " + to_string(x.stage);
  if (x.stage == refit_stage::stream) out += ": " + to_string(x.stream);
  if (!x.error.empty()) out += ", error: " + x.error;
  return out + ")";
}

std::string to_string(refit_mode x) {
  switch (x) {
    case refit_mode::colocated: return "colocated";
    case refit_mode::dedicated: return "dedicated";
  }
  return "unknown";
}

std::string to_string(const handshake_report& x) {
  return "handshake_report(" + to_string(x.mode) + ", " + v(x.version) + ", " +
         std::to_string(x.rollout_workers.size()) + " rollout workers, " + std::to_string(x.bucket_count) +
         " buckets)";
}

std::string to_string(const refit_report& x) {
  return "refit_report(" + to_string(x.mode) + ", " + v(x.version) + ", " + std::to_string(x.buckets) + " buckets" +
         (x.checksums ? " checksummed" : "") + ", " + std::to_string(x.dropped_acks) + " dropped acks)";
}

std::string to_string(const step_report& x) {
  return "step_report(step " + std::to_string(x.step) + ", generated with " + v(x.generated_with) + ", trained to " +
         v(x.trained_to) + ", " + std::to_string(x.trajectories.size()) + " trajectories, reward mean " +
         fmt(x.reward_mean) + ")";
}

std::string to_string(const validation_sample& x) {
  return "validation_sample(prompt " + std::to_string(x.prompt_index) + ", " + std::to_string(x.prompt.size()) + "+" +
         std::to_string(x.tokens.size()) + " tokens, reward " + fmt(x.reward) + ", " + x.worker + ")";
}

std::string to_string(const validation_report& x) {
  return "validation_report(after step " + std::to_string(x.step) + ", " + v(x.version) + ", " +
         std::to_string(x.prompts) + " prompts in " + std::to_string(x.rounds) + " rounds, accuracy " + fmt(x.accuracy) +
         ", avg length " + fmt(x.avg_length) + ")";
}

}  // namespace tandem
