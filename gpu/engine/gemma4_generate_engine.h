// The Gemma 4 generate engine: the model of gpu/model/ behind the generate_engine contract, on
// the device of its context: float32 on any device, bfloat16 on CUDA; over a paged KV cache
// (gpu/model/kv_cache.h) on that device, in the weights' dtype. The scheduling below runs on the
// host; each step sends the device its rows (tokens, positions, offsets, block tables) and reads
// back one token and one logprob per sampled row.
//
// Scheduling, once per step():
//
//   submit() --> waiting --(admitted in submission order while fewer than max_num_sequences run
//                and the free blocks hold its first chunk plus a block of growth per running one)-->
//   running: its rows (prompt, then one per generated token) go through forward_cached, the
//            prompt in chunks of at most prefill_token_budget rows per step shared by every
//            prefilling sequence, one row per decoding sequence (decoding rows come first)
//   running --(stop token emitted, or max_new_tokens)--> finished: blocks freed at once
//   running --(the KV pools cannot hold this step's rows: the newest running sequence is
//             preempted)--> waiting (front), its tokens kept, its blocks freed; recomputed when
//             readmitted, so step() never fails for lack of blocks and nothing is reserved for
//             worst-case lengths
//
// Shared prompts: requests whose prompts are equal (the n samples of a GRPO group) share one
// prefix holder, a cache sequence holding the prompt but its last token, prefilled once; each
// request forks it (sharing its full blocks) and computes its last prompt token itself, whose
// logits it samples. A holder lives while a request still has to fork it, and is released first
// when blocks run short (its requests then compute their prompt alone).
//
// Sampling: the row of a sequence's last known token gives the logits of the next one, sampled by
// ops::sampling_forward with the request's coordinates (position = the new token's index in the
// whole sequence) and scored under the distribution sampled from: what the train engine's
// logprobs() gives the same token. With the row-invariant ops, a request's tokens and logprobs
// are the same bits whatever else runs beside it, admitted in any order, preempted or not.
//
// Captured decode steps: a step whose every row is a decoding sequence's, all drawn with one set
// of sampling parameters, runs as work captured once per batch bucket and replayed (decode_capture.h:
// on CUDA one graph launch instead of hundreds of kernel and library calls); its rows padded to
// the bucket write the cache's spare blocks, so every real row keeps its bits. Prefill steps,
// mixed parameters, a trace hook or an armed op profile run op by op.
//
// Overlapped decode steps: while a captured step runs, the host enqueues the next one before it
// reads this one's tokens, when nothing could change its rows (no admission pending, every running
// sequence in the step). That step takes its tokens from the device's draws; the host appends this
// step's, settles it, and returns from step() with the next in flight, so the host's scheduling
// runs beside the device's work instead of between steps:
//
//   step k in flight --step()--> [nothing else could run: step k + 1 enqueued (its rows: k's, less
//     those that reach max_new_tokens at k; one more cache row each)] wait for k's tokens, append,
//     settle (a sequence finished at k has its row of k + 1 dropped) --> step k + 1 in flight, or
//     none
//
// A request's tokens and logprobs are the same bits either way (rows are independent); a row of a
// sequence that stopped at k is computed once more and dropped. Whatever changes the weights or
// the cache (a refit, release_cache) first waits for the step in flight and takes its tokens.
//
// Weights: the engine's own slab on its device, replaced by begin / import_bucket / commit (a
// staging slab, swapped in at commit), or a train engine's weights read in place on the same
// device (share_weights; a refit is then bump_weight_version).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/core/slab.h"
#include "gpu/core/trace.h"
#include "gpu/core/upload_batch.h"
#include "gpu/engine/decode_capture.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/weight_manifest.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/kv_cache.h"
#include "gpu/model/model_weights.h"

namespace tandem::gpu {

/// Where decode steps are captured once per batch bucket and replayed (decode_capture.h): on CUDA
/// a step is then one graph launch. On the CPU a replay runs the padded step's ops again, which
/// only costs the padding rows, so it runs there when asked for (tests).
enum class decode_capture_mode { on_cuda, always, never };

struct gemma4_generate_options {
  std::int64_t max_num_sequences = 8;        ///< running sequences at once, >= 1
  std::int64_t max_sequence_length = 4096;   ///< prompt plus generated tokens, >= 2
  std::int64_t prefill_token_budget = 256;   ///< prompt rows per step over all sequences, >= 1
  std::int64_t kv_block_size = 16;           ///< positions per KV block, >= 1
  std::int64_t kv_cache_bytes = 64 << 20;    ///< the KV pools' budget (kv_cache_options_for)
  std::int64_t bucket_bytes = 1 << 20;       ///< refit bucket size, >= 1
  bool share_prompts = true;                 ///< equal prompts share a prefilled prefix
  /// How a refit of the engine's own weights arrives (generate_engine.h): into a staging slab of
  /// the weights' size (the old version live until the commit), or over the live weights.
  refit_receive receive = refit_receive::staging;
  /// Decode steps (every row a decoding sequence's, one set of sampling parameters, no trace hook,
  /// no op profile armed, a model without MoE blocks, whose router reads back) are captured.
  decode_capture_mode capture_decode = decode_capture_mode::on_cuda;
  /// A captured decode step enqueued before the last one's tokens are read (see above).
  bool overlap_decode = true;
  tracer trace;                              ///< forward_cached's trace hook of every step (tests)
};

/// Where step() spends its time, accumulated since creation.
struct generate_profile {
  std::int64_t steps = 0;      ///< step() calls that ran the model
  std::int64_t rows = 0;       ///< rows through the model (prefill and decode)
  std::int64_t tokens = 0;     ///< tokens sampled
  double step_seconds = 0;     ///< inside step()
  double model_seconds = 0;    ///< inside the model's ops (forward_cached, the head, sampling)
  std::int64_t captured_steps = 0;  ///< decode steps replayed from a capture, or captured
  std::int64_t captures = 0;        ///< captures made (one per bucket and sampling parameters, again after a move)
  std::int64_t overlapped_steps = 0;  ///< captured steps enqueued before the one before them was read back
};

class gemma4_generate_engine final : public generate_engine {
 public:
  /// Loads the checkpoint's text stack on `ctx`'s device: opened (open_checkpoint) for float32, or
  /// for bfloat16 on CUDA. invalid_argument naming the option that cannot work (a KV budget too
  /// small for one block of each pool, ...); out_of_memory naming what did not fit.
  static result<std::unique_ptr<gemma4_generate_engine>> create(const exec_context& ctx, checkpoint source,
                                                                const gemma4_generate_options& options);
  /// The same over weights already on the device (a benchmark's random initial weights): a
  /// resident slab of the layout's bytes on ctx.dev, which the engine takes.
  static result<std::unique_ptr<gemma4_generate_engine>> create_with_weights(const exec_context& ctx, checkpoint source, slab weights,
                                                                             const gemma4_generate_options& options);
  /// The same reading `shared` in place from the start (a colocated trainer's weights, as
  /// share_weights binds them), so no copy of its own is ever read or held: `source` gives the
  /// config, layout and names (its weight files are not read). The owner of `shared` must outlive
  /// the engine.
  static result<std::unique_ptr<gemma4_generate_engine>> create_sharing(const exec_context& ctx, checkpoint source,
                                                                        const weight_source& shared,
                                                                        const gemma4_generate_options& options);

  /// Also refuses token ids outside the vocabulary, stop tokens outside it, invalid sampling
  /// parameters, and a request whose prompt plus max_new_tokens the KV pools could not hold
  /// alone, each naming the request.
  status submit(std::span<const generation_request> requests) override;
  result<std::int64_t> step() override;
  std::vector<finished_sequence> collect() override;
  std::uint64_t weight_version() const override { return version_; }
  refit_receive receive() const override { return options_.receive; }
  bool has_live_weights() const override { return shared_ || !overwritten_; }
  status begin_weight_update(std::uint64_t version) override;
  status import_bucket(std::size_t index, std::span<const std::byte> bytes) override;
  status commit_weight_update() override;
  void abort_weight_update() override;
  status share_weights(const weight_source& source) override;
  bool shares_weights() const override { return shared_; }
  status bump_weight_version(std::uint64_t version) override;
  status release_cache() override;
  status restore_cache() override;
  bool cache_resident() const override { return cache_.has_value(); }

  const weight_manifest& manifest() const { return manifest_; }
  const bucket_plan& plan() const { return plan_; }
  const model_config& config() const { return source_.config; }
  /// The dtype of the weights, the activations and the KV cache.
  dtype weight_type() const { return source_.layout.tensors.front().type; }
  /// chunked_xxh3 of the live weights in manifest order (a train engine's weights_digest()).
  std::uint64_t weights_digest() const;
  /// The KV cache (for tests and the benchmark); empty while released.
  const kv_cache* cache() const { return cache_ ? &*cache_ : nullptr; }
  std::int64_t waiting_count() const { return static_cast<std::int64_t>(waiting_.size()); }
  std::int64_t running_count() const { return static_cast<std::int64_t>(running_.size()); }
  /// Sequences preempted so far, and prompt prefixes computed once for several requests.
  std::int64_t preemptions() const { return preemptions_; }
  std::int64_t shared_prefills() const { return shared_prefills_; }
  const generate_profile& profile() const { return profile_; }
  /// Whether a captured step is in flight (step() returned with it enqueued; see above).
  bool step_in_flight() const { return !in_flight_.empty(); }

 private:
  struct prefix {                            // a prompt minus its last token, shared by requests
    std::vector<std::int32_t> tokens;
    std::optional<kv_cache::sequence_id> cache;
    std::int64_t computed = 0;               // positions of it in the cache
    std::int64_t users = 0;                  // requests that still have to fork it
    std::int64_t forks = 0;                  // requests that forked it
  };
  struct sequence {
    generation_request request;
    std::vector<std::int32_t> tokens;        // prompt, then generated
    std::vector<float> logprobs;             // per generated token
    std::optional<kv_cache::sequence_id> cache;
    std::int64_t computed = 0;               // positions in its cache
    const std::vector<std::int32_t>* prefix_key = nullptr;  // the prefix it will fork, if any
    std::uint64_t admitted = 0;              // admission order (preemption takes the newest)
  };
  struct planned {                           // rows of one step for a sequence or a prefix holder
    sequence* seq = nullptr;
    prefix* pre = nullptr;
    std::int64_t rows = 0;
  };
  struct launched {                          // a captured decode step in flight
    std::vector<sequence*> rows;             // a row's sequence; null once it finished
    ops::sampling_params params;
  };

  gemma4_generate_engine() = default;
  /// An engine of `source` and `options` on ctx with its cache, scratch and plans and no weights
  /// bound yet (create_with_weights and create_sharing bind them).
  static result<std::unique_ptr<gemma4_generate_engine>> assemble(const exec_context& ctx, checkpoint source,
                                                                  const gemma4_generate_options& options);
  static status check_create(const exec_context& ctx, const checkpoint& source, const gemma4_generate_options& options);
  status check_request(const generation_request& r) const;
  status rebind(const std::vector<const std::byte*>& addresses);
  void detach_prefix(sequence& s);
  void release_holder(prefix& p);
  /// Forks s's prefix holder once it is computed and the blocks are free: true when s forked; a
  /// failed copy on the device is returned.
  result<bool> fork_ready(sequence& s);
  /// True when the pools hold s's first chunk and a block of growth for every running sequence.
  bool room_for(const sequence& s) const;
  std::vector<planned> plan_step();
  bool fits(const std::vector<planned>& plan) const;
  /// Frees blocks for the next plan: the newest running sequence goes back to waiting (or, with one
  /// left, the prefix holders go); false when nothing can be freed.
  bool preempt_one();
  status run(const std::vector<planned>& plan);
  /// Admits, plans and runs a step (a captured one is only enqueued: in_flight_); false when
  /// nothing runs. Resets the engine after a failed step.
  result<bool> start_step();
  /// s's decode row at its cache's next position, reserved there, drawing the sequence's token
  /// `draw` (its token left to the caller).
  result<decode_row> reserve_row(sequence& s, std::size_t draw);
  /// Whether `plan` runs as a captured decode step, and enqueues it so (in_flight_).
  bool capturable(const std::vector<planned>& plan) const;
  status launch_captured(const std::vector<planned>& plan);
  /// With a captured step in flight: the next one enqueued when nothing else could run (see
  /// above), then the oldest one's draws taken.
  status advance();
  /// Indices of the rows of `last` that continue after it, when the next step may follow it now.
  std::optional<std::vector<std::int64_t>> follow_up(const launched& last) const;
  /// Waits for the oldest step in flight, appends its draws, settles.
  status absorb();
  /// absorb() until nothing is in flight (reset_after_failure() when one fails).
  status drain();
  /// After a step's draws: finished sequences leave, windows are trimmed.
  void settle();
  void finish(std::size_t running_index, finish_reason why);
  void reset_after_failure();

  checkpoint source_;
  gemma4_generate_options options_;
  std::unique_ptr<workspace> scratch_;
  // A step's rows (tokens, positions, offsets, block tables) and each sampled group's row ids go
  // to the device in one enqueued copy each; the group's read-back is the step's one wait.
  std::unique_ptr<upload_batch> rows_upload_, ids_upload_;
  exec_context ctx_;
  weight_manifest manifest_;
  bucket_plan plan_{{}, 1};
  slab weights_;                  // [layout.total_elements] in weight_type(), unless shared
  slab staging_;                  // the same while an update is staged (staging)
  /// In place: the version whose update began overwriting weights_ and has not committed (the
  /// engine has no live weights meanwhile, and after the update failed).
  std::optional<std::uint64_t> overwritten_;
  model_weights w_;
  bool shared_ = false;
  weight_source source_weights_;  // when shared
  std::uint64_t version_ = 0;
  std::optional<std::uint64_t> pending_;
  std::vector<bool> received_;
  std::size_t received_count_ = 0;
  std::optional<kv_cache> cache_;
  std::unique_ptr<decode_capture> captured_;  // cleared whenever the weights or the cache move
  std::deque<launched> in_flight_;            // at most two, oldest first
  std::deque<sequence> waiting_;
  std::vector<std::unique_ptr<sequence>> running_;
  std::map<std::vector<std::int32_t>, prefix> prefixes_;
  std::vector<finished_sequence> finished_;
  std::unordered_set<std::uint64_t> ids_;  // waiting, running, or finished and not yet collected
  std::uint64_t admissions_ = 0;
  std::int64_t preemptions_ = 0;
  std::int64_t shared_prefills_ = 0;
  generate_profile profile_;
};

}  // namespace tandem::gpu
