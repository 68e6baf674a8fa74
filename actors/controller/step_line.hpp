// A step's progress line (rl_loop.hpp) in its two forms, both made from the step's report: the
// terminal's compact line, the numbers a person watches,
//   step 3/60  reward 0.625  loss -0.0123  tmpe 1.0000  gen_kl 0.0e+00  192 tok  0.11 s  v2->v3
// and the log's (controller.log, output that is not a terminal), which adds what the run moved:
// the refit (its mode, buckets and bytes), the controller's control bytes (heartbeats apart) and
// the weights digest of the policy ranks,
//   step 3/60: reward 0.625, loss -0.0123, tmpe 1.0000, gen_kl 0.0e+00, 192 tokens, v2 -> v3 live
//   (dedicated refit, 4 buckets, 1048576 bytes), control 5120 bytes, 0.11 s, weights 0x... on every policy rank
// (one line), and on a colocated run the device turns since the last step (step_line.cpp
// turns_text: the optimizer state's offload and restore with their bandwidth beside the host
// link's, the KV cache freed and made, the device memory in use as each turn ended). tmpe is
// train/token_mult_prob_error (1: the trainer scored each token as the generator did), gen_kl
// train/gen_kl_error (0: exact), as metrics.jsonl has them (step_metrics.hpp); loss is pg loss +
// beta x KL; tok/tokens the masked tokens trained on.
#pragma once

#include <cstdint>
#include <string>

#include "actors/api/messages.hpp"
#include "actors/bridge/socket_thread.hpp"
#include "actors/controller/memory_plan_figures.hpp"

namespace tandem {

/// What the line says besides the report.
struct step_line_facts {
  std::int64_t number = 0;  ///< the step's, from 1
  std::int64_t steps = 0;   ///< the run's
  socket_thread::traffic_counts traffic;  ///< the controller's during the step
  double seconds = 0;       ///< the whole step
  memory_plan_figures plan;  ///< put beside the memory in use (zero: none)
};

/// One step's line, in both forms.
struct step_line {
  std::string compact;  ///< for a terminal
  std::string full;     ///< for a log: every field
};

/// A warm-up step's report gives format_sft_step_line's.
step_line format_step_line(const step_report& r, const step_line_facts& f);

/// A supervised warm-up step's line: "warm-up 3/50  loss 1.2345  grad_norm 0.812  384 tok  0.05 s  v2->v3"
/// (the loss: the mean cross-entropy of the targets' tokens), and its log form with the refit,
/// control bytes and digests.
step_line format_sft_step_line(const step_report& r, const step_line_facts& f);

}  // namespace tandem
