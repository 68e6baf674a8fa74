// DAPO dynamic sampling as NeMo-RL's driver runs it within one GRPO step: generation rounds are
// added to a cache that keeps only the samples whose unshaped-reward std is not 0 (their group's
// rewards differ, so they carry a learning signal); once the cache holds at least
// target_samples (num_prompts_per_step x num_generations_per_prompt) samples, the first
// target_samples of them, in the order kept, are the step's batch and the rest are counted as
// discarded valid samples. The std is the group's over the round's samples of one group id, of
// the step's baseline kind (leave-one-out: each sample's std over the others of its group).
// Round k is the k-th added; a round that leaves the cache short when k > max_gen_batches ends
// the step with out_of_rounds (so at most max_gen_batches + 1 rounds are generated, as NeMo-RL
// counts them).
//
//                 add_round: still short, rounds <= max_gen_batches
//                  +-----+
//                  |     v
//   create --> collecting --add_round: short, rounds > max_gen_batches--> exhausted
//                  |                                                       (out_of_rounds from
//                  | add_round: kept >= target_samples                     every later call)
//                  v
//                 full --take()--> taken (the batch handed out once; later calls: wrong_state)
//
// An add_round with bad input (invalid_input) changes nothing and counts no round. add_round
// on full or taken, and take() on collecting or taken, answer wrong_state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "orchestration/rl/group_baseline.h"
#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

struct dynamic_sampling_settings {
  std::int64_t target_samples = 0;   ///< num_prompts_per_step x num_generations_per_prompt
  std::int64_t max_gen_batches = 0;  ///< dynamic_sampling_max_gen_batches
  baseline_kind kind = baseline_kind::mean;  ///< the std test uses the step's baseline kind
};

/// One generated sample of a round, as the cache needs it.
struct round_sample {
  std::int64_t group = 0;      ///< its prompt within the round (>= 0); ids may repeat in other rounds
  double unshaped_reward = 0;  ///< the reward the std test looks at
  std::int64_t payload = 0;    ///< the caller's handle on the sample (an index into its trajectories)
};

/// A sample of the step's batch.
struct kept_sample {
  std::int64_t group = 0;    ///< the batch's group index: [0, group_count), in order of first appearance
  std::int64_t round = 0;    ///< the round it came from, 1-based
  std::int64_t payload = 0;  ///< as given to add_round
};

/// The dynamic-sampling metrics of a step, under NeMo-RL's names.
struct dynamic_sampling_metrics {
  std::int64_t num_gen_batches = 0;              ///< dynamic_sampling_num_gen_batches: rounds generated
  std::int64_t num_discarded_valid_samples = 0;  ///< dynamic_sampling_num_discarded_valid_samples
};

struct dynamic_sampling_batch {
  std::vector<kept_sample> samples;  ///< exactly target_samples, in the order kept
  std::int64_t group_count = 0;      ///< distinct groups among them
  dynamic_sampling_metrics metrics;
};

enum class dynamic_sampling_state { collecting, full, taken, exhausted };

/// The state's name ("collecting").
const char* to_string(dynamic_sampling_state s);

class dynamic_sampling_cache {
 public:
  /// Errors: invalid_setting (target_samples < 1, max_gen_batches < 1).
  static rl_result<dynamic_sampling_cache> create(const dynamic_sampling_settings& s);

  /// Adds the next generation round; nullopt when taken in (then see state()). Errors:
  /// invalid_input (an empty round, a group id below 0, a reward not finite), out_of_rounds
  /// (this round left the cache short and it was past max_gen_batches; the message names the
  /// rounds, the samples kept and the samples needed), wrong_state.
  [[nodiscard]] std::optional<rl_error> add_round(std::span<const round_sample> samples);

  /// The step's batch: the first target_samples samples kept. Error: wrong_state unless full,
  /// out_of_rounds when exhausted.
  rl_result<dynamic_sampling_batch> take();

  dynamic_sampling_state state() const { return state_; }
  bool full() const { return state_ == dynamic_sampling_state::full; }
  std::int64_t rounds() const { return rounds_; }
  std::int64_t kept() const { return static_cast<std::int64_t>(kept_.size()); }
  std::int64_t needed() const { return settings_.target_samples; }

 private:
  explicit dynamic_sampling_cache(const dynamic_sampling_settings& s) : settings_(s) {}
  rl_error out_of_rounds() const;

  dynamic_sampling_settings settings_;
  dynamic_sampling_state state_ = dynamic_sampling_state::collecting;
  std::int64_t rounds_ = 0;
  struct entry {
    std::int64_t round, group, payload;
  };
  std::vector<entry> kept_;
};

}  // namespace tandem::rl
