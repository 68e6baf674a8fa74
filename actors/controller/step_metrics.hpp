// A step's record in metrics.jsonl and TensorBoard, under NeMo-RL's metric names where NeMo-RL
// has one, so its users read the same numbers (and its metric checks run on our exports):
//
//   train/loss                  pg loss + beta x KL, token- or sequence-normalised as configured
//   train/kl_penalty            the KL term / beta (0 without KL)
//   train/token_mult_prob_error mean over masked tokens of exp(|lp_gen - lp_prev|)   (1: exact)
//   train/gen_kl_error          mean k3(lp_prev - lp_gen): KL(generator || trainer)  (0: exact)
//   train/sampling_importance_ratio  mean importance weight (after truncation)
//   train/is_oob_ratio          tokens (tis, icepop) or sequences (seq-mask-tis) the truncation changed
//   train/approx_entropy        mean -exp(lp_cur - lp_gen) lp_cur
//   train/probs_ratio[_min|_max], train/probs_ratio_clamped[_min|_max]
//   train/clipped_low_fraction, train/clipped_high_fraction, train/clipped_dual_fraction
//                               tokens where the low clip, clip-higher or the dual clip is active
//   train/grad_norm, train/lr   policy rank 0's optimizer step (the norm before clipping)
//   train/reward                mean scaled and shaped reward of the step's samples
//   train/filtered_reward       mean reward of the samples trained on
//   train/raw_reward            mean environment reward, before scaling and shaping
//   train/mean_gen_tokens_per_sample, train/max_gen_tokens_per_sample
//   train/num_tokens            masked tokens trained on; train/overlong_filtered_samples
//   timing/train/{generation, reward_calculation, policy_and_reference_logprobs, policy_training,
//                 prepare_for_generation/transfer_and_update_weights (the refit), total_step_time}
//                               seconds; timing/train/generation_tokens_per_sec
//   validation/accuracy         mean raw reward of the greedy responses to the validation prompts
//   validation/avg_length       their mean generated tokens
//   timing/validation/total     seconds of the validation pass
//                               (the validation metrics only in the record of a step after which
//                               validation ran; grpo.val_at_start's pass has a record of its own,
//                               step 0, holding only them, as NeMo-RL logs it at step 0)
// and tandem's own fields: generated_with, trained_to, trajectories, micro_batches, refit{...},
// control_bytes{...} (the controller's traffic during the step), weights_digests. A colocated run
// (a member hosting both engines) adds its device turns since the last record (the slowest
// rank's seconds, every rank's bytes):
//   timing/train/{offload_optimizer, restore_optimizer}   the optimizer state to pinned host
//                               memory while generating (policy.offload_optimizer_for_generation)
//                               and back for training, seconds
//   timing/train/{release_kv_cache, restore_kv_cache}     the generator's cache freed for training
//                               and made again, seconds
//   performance/{offload_optimizer, restore_optimizer}_gb_per_s beside
//   performance/host_link_gb_per_s (pinned host memory to the device, measured as the member
//                               started; 0 without offloading)
//   memory/optimizer_offloaded_gib, memory/{training, generation}_in_use_gib (the device memory
//                               in use as the last turn of each ended; 0 on the CPU)
//
// A step of the supervised warm-up (sft.max_num_steps) has a record of its own, as NeMo-RL's SFT
// logs it: sft/loss (the mean next-token cross-entropy over the targets' tokens), sft/grad_norm,
// sft/lr, sft/num_tokens, timing/sft/{policy_training, transfer_and_update_weights,
// total_step_time}, with trained_to, refit{...}, control_bytes{...}, weights_digests and the device
// turns' figures under timing/sft/ (as above); the pass
// right after the warm-up's last step adds its validation metrics to that record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/api/messages.hpp"
#include "actors/bridge/socket_thread.hpp"
#include "actors/controller/memory_plan_figures.hpp"
#include "gpu/ops/pg_loss.h"
#include "orchestration/records/tensorboard_events.h"

namespace tandem {

/// The settings a step's metrics depend on.
struct step_metric_settings {
  gpu::ops::importance_correction importance = gpu::ops::importance_correction::tis;
  memory_plan_figures plan;
};

/// A weights digest as the records print it: "0x" and 16 hex digits.
std::string digest_hex(std::uint64_t digest);

/// The step's record (numbered from 1) for metrics.jsonl.
nlohmann::json step_record(const step_report& r, const socket_thread::traffic_counts& traffic, double seconds,
                           const step_metric_settings& s);

/// A warm-up step's record (numbered from 1, as every step).
nlohmann::json sft_step_record(const step_report& r, const socket_thread::traffic_counts& traffic, double seconds,
                               const step_metric_settings& s);

/// Adds the validation metrics of `v` to `record`, the record of the step the pass ran after.
void add_validation_metrics(nlohmann::json& record, const validation_report& v);

/// The record of a pass before the first step: step 0 and the validation metrics only.
nlohmann::json validation_record(const validation_report& v);

/// Every number of `record` but "step" as a TensorBoard scalar, nested objects joined by '/'
/// ("refit/bytes"); booleans, strings and arrays are left out.
std::vector<records::tagged_scalar> scalars_of(const nlohmann::json& record);

}  // namespace tandem
