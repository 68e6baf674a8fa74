// A fake generate_engine for actor and multi-process tests: a real little continuous-batching
// scheduler whose tokens are a pure function of the weight hash, the prompt and the counter RNG,
// so a test recomputes (expected_tokens) which weights produced any trajectory. Its weights (the
// fake model of fake_weights.h) are its own copy, replaced by versioned bucket refits, or a
// trainer's weights read in place (share_weights, the colocated case).
//
// Sequences (at most max_num_sequences running; admission in submission order):
//
//   submit() --> waiting --(step(): a running slot is free)--> running
//   running --(step(): one token)--> running | finished (stop token emitted, or max_new_tokens)
//   finished --(collect())--> returned with the weight version that generated every token
//
// Token i of a request (position p = prompt length + i in the whole sequence):
//   words = random_words(request.rng with position = p)
//   token = fake_mix64(hash-mix of weight_hash, chunked_xxh3 of the prompt tokens, words) mod vocab
//   logprob = fake_token_logprob(weight_hash, token, p, vocab)   (what fake_train_engine reports)
// Sampling parameters are checked but do not change tokens.
//
// Weight updates (begin refused while sequences wait or run, and for a version <= the current):
//
//   live(v) --begin_weight_update(w > v)--> staging(w): buckets land in a staging copy
//   staging(w) --import_bucket(i) ok--> staging(w)
//   staging(w) --commit_weight_update(), every bucket arrived--> live(w)
//   staging(w) --abort, or any failed import_bucket / commit_weight_update--> live(v), untouched
//
// submit() is refused while an update is staged, so no sequence can span two versions. With shared
// weights there are no buckets: bump_weight_version is the whole refit, and begin_weight_update is
// refused. release_cache() has no cache to free (the fake keeps none) but keeps the contract's
// rules: refused while sequences wait or run, and step() refuses to run work while released. With verify_checksums every bucket must come through the overload
// carrying its checksum (chunked_xxh3 of its bytes, gpu/core/chunked_hash.h); a mismatch aborts
// the update.
//
// Not thread-safe, except fail_next(), which a test may call from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_set>
#include <vector>

#include "gpu/engine/fake/fake_weights.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/weight_manifest.h"

namespace tandem::gpu {

struct fake_generate_options {
  fake_model_options model;              ///< the same options as the trainer's
  std::int32_t max_num_sequences = 8;    ///< running sequences at once, >= 1 (0 or less: 1)
  std::int64_t bucket_bytes = 1 << 20;   ///< refit bucket size, > 0 (0 or less: 1 MiB)
  bool verify_checksums = false;         ///< every bucket must come with its chunked_xxh3 checksum
  refit_receive receive = refit_receive::staging;  ///< a refit into a second copy, or over the live one
};

/// The calls whose failure a test can inject.
enum class fake_generate_operation { submit, step, begin_weight_update, import_bucket, commit_weight_update };

class fake_generate_engine final : public generate_engine {
 public:
  /// Version 0, its own copy of the initial weights (equal to a fake trainer's of the same
  /// options, so both hash alike before the first step).
  explicit fake_generate_engine(const fake_generate_options& options);

  status submit(std::span<const generation_request> requests) override;
  /// Admits, then emits one token per running sequence. An injected failure drops every running
  /// sequence (not returned by collect(); their ids become free) and keeps waiting ones queued.
  result<std::int64_t> step() override;
  std::vector<finished_sequence> collect() override;
  std::uint64_t weight_version() const override { return version_; }
  refit_receive receive() const override { return options_.receive; }
  bool has_live_weights() const override { return !shared_.empty() || !overwritten_; }
  status begin_weight_update(std::uint64_t version) override;
  /// Refused when checksums are on: use the overload with the checksum.
  status import_bucket(std::size_t index, std::span<const std::byte> bytes) override;
  /// The same, checking that chunked_xxh3 of `bytes` is `checksum` (whatever verify_checksums says).
  status import_bucket(std::size_t index, std::span<const std::byte> bytes, std::uint64_t checksum);
  status commit_weight_update() override;
  void abort_weight_update() override;

  /// Reads a fake trainer's shared_weights() (same options) in place from now on.
  status share_weights(const weight_source& source) override;
  bool shares_weights() const override { return !shared_.empty(); }
  status bump_weight_version(std::uint64_t version) override;
  status release_cache() override;
  status restore_cache() override;
  bool cache_resident() const override { return cache_resident_; }

  /// chunked_xxh3 of the weights read now (cached for its own copy; recomputed on every call, and
  /// on every step() with running sequences, when shared, since the owner may change them).
  std::uint64_t weight_hash() const;
  const weight_manifest& manifest() const { return manifest_; }
  /// The refit bucket plan (manifest(), bucket_bytes).
  const bucket_plan& plan() const { return plan_; }
  /// Changes the bucket size (the refit handshake may set it); refused while an update is staged.
  status set_bucket_bytes(std::int64_t bucket_bytes);
  const fake_generate_options& options() const { return options_; }

  std::int64_t waiting_count() const { return static_cast<std::int64_t>(waiting_.size()); }
  std::int64_t running_count() const { return static_cast<std::int64_t>(running_.size()); }
  /// The most sequences ever running at once.
  std::int64_t peak_running() const { return peak_running_; }
  /// The version being staged, if an update is in progress.
  std::optional<std::uint64_t> pending_version() const { return pending_; }

  /// Makes the next call of `op` fail with device_error "fake_generate_engine: injected failure
  /// in <op>". A failing import_bucket or commit_weight_update aborts the update; the others
  /// change nothing (step: see above).
  void fail_next(fake_generate_operation op) { failures_.arm(op); }

  /// The tokens `request` gets from weights hashing to `weight_hash`: proof of which weights
  /// generated a trajectory.
  static std::vector<std::int32_t> expected_tokens(std::uint64_t weight_hash, const generation_request& request,
                                                   std::int32_t vocab);

 private:
  struct sequence {
    generation_request request;
    std::uint64_t prompt_hash = 0;
    std::vector<std::int32_t> tokens;
    std::vector<float> logprobs;
  };

  status check_no_work(const std::string& which) const;
  status import_checked(std::size_t index, std::span<const std::byte> bytes, std::optional<std::uint64_t> checksum);
  status abort_with(status why);

  fake_generate_options options_;
  weight_manifest manifest_;
  std::vector<std::int64_t> entry_begin_;  // byte offset of each manifest entry in the weight stream
  bucket_plan plan_;
  std::vector<float> own_;                 // F32 [weight_bytes / 4], live unless shared
  std::vector<float> staging_;             // F32 [weight_bytes / 4], allocated at the first bucket refit (staging)
  std::optional<std::uint64_t> overwritten_;  // in place: the update writing over own_ that has not committed
  weight_source shared_;                   // a trainer's weights, when colocated
  bool cache_resident_ = true;
  std::uint64_t version_ = 0;
  mutable std::optional<std::uint64_t> hash_;  // of own_
  std::optional<std::uint64_t> pending_;
  std::vector<bool> received_;
  std::size_t received_count_ = 0;
  std::deque<sequence> waiting_;
  std::vector<sequence> running_;
  std::vector<finished_sequence> finished_;
  std::unordered_set<std::uint64_t> ids_;  // waiting, running, or finished and not yet collected
  std::int64_t peak_running_ = 0;
  fake_failure_switch<fake_generate_operation> failures_;
};

/// "submit", "step", ...
const char* to_string(fake_generate_operation op);

}  // namespace tandem::gpu
