// What a run trains and validates on, and how it scores responses, from the recipe's data.* and
// env.* keys: the prompt sets with each prompt's reference answer, the supervised warm-up's
// examples, and the scoring function. The controller's RL loop builds it once; `tandem run`
// builds it before any member starts, so a bad dataset line fails there naming file and line.
//
//   data.train_dataset null, env.name parity or external: the parity task's prompts (engine_factory.hpp)
//   data.train_dataset null, env.name arithmetic: the arithmetic task's training problems, its
//                      held-out problems as the validation set (orchestration/environments/arithmetic_task.h)
//   data.train_dataset FILE: its records (orchestration/data/prompt_dataset.h): `prompt` text through
//                      the model's tokenizer with the tokenizer's template (Gemma's adds <bos>),
//                      `messages` in Gemma 4's chat format with its generation prompt, thinking off
//                      (orchestration/data/chat_format.h), `input_ids` as they are
//   data.validation_dataset FILE: likewise; null with a dataset: no validation set (a recipe that
//                      validates is refused by the rules)
//   records longer than data.max_input_seq_length tokens are left out and counted
//
// Text tasks (arithmetic, math, datasets) need the checkpoint directory's tokenizer.json or
// tokenizer.model (runtime.engine gemma4). A response is the text of its generated tokens, special tokens left
// out; one holding an id the tokenizer has no text for is scored 0 (it cannot be an answer).
//   env.name arithmetic: 1 when that text, stripped, is the answer exactly; else 0
//   env.name math:       env.math.checker's verdict (answer_line or strict_boxed): 1 or 0
//
// The warm-up (sft.max_num_steps > 0) trains on the training prompts' answers: each example is a
// prompt and its target, the answer's tokens (no template) and the model's first eos id.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "actors/driver/driver.hpp"
#include "actors/environment/scoring.hpp"
#include "gpu/core/status.h"
#include "orchestration/config/recipe.h"

namespace tandem {

/// Prompts and, per prompt, its reference answer (empty for the parity task, which needs none).
struct prompt_set {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::string> answers;
  std::string source;       ///< for messages: "the arithmetic task's training problems", "data/train.jsonl"
  std::size_t records = 0;  ///< records read (tokens.size() + skipped)
  std::size_t skipped = 0;  ///< records longer than data.max_input_seq_length, left out
};

struct run_task {
  prompt_set training;
  std::optional<prompt_set> validation;  ///< when the recipe validates
  std::vector<driver_config::supervised_example> sft;  ///< when sft.max_num_steps > 0
  scoring_function score;
};

/// The run's task. Errors name the recipe key and, for a dataset, the file and line:
/// invalid_argument for a bad record, a missing tokenizer or a set with no prompt short
/// enough.
gpu::result<run_task> load_run_task(const config::recipe_config& recipe);

/// "12 of 9744 training prompts are longer than data.max_input_seq_length (16 tokens) and left out"
/// lines for the sets that left any out; empty when none did.
std::vector<std::string> skipped_prompt_notes(const run_task& task, const config::recipe_config& recipe);

}  // namespace tandem
