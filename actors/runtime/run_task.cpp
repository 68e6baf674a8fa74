// The run's prompt sets, warm-up examples and scoring function (run_task.hpp).
#include "actors/runtime/run_task.hpp"

#include <filesystem>
#include <memory>
#include <utility>

#include "actors/runtime/engine_factory.hpp"
#include "gpu/model/config.h"
#include "orchestration/data/chat_format.h"
#include "orchestration/data/prompt_dataset.h"
#include "orchestration/environments/arithmetic_task.h"
#include "orchestration/environments/math_answer.h"
#include "orchestration/tokenizer/tokenizer.h"

namespace tandem {
namespace {

using config::environment_kind;
using tokenizer_ptr = std::shared_ptr<const tokenizer::tokenizer>;

gpu::status refused(const std::string& what) { return {gpu::status_code::invalid_argument, what}; }

bool text_task(const config::recipe_config& r) {
  return r.data.train_dataset || r.env.name == environment_kind::arithmetic || r.env.name == environment_kind::math;
}

/// The checkpoint directory's tokenizer (tokenizer.json, else tokenizer.model); `why` says what needs it.
gpu::result<tokenizer_ptr> model_tokenizer(const config::recipe_config& r, const std::string& why) {
  if (r.runtime.engine != config::engine_kind::gemma4)
    return refused(why + " needs the model's tokenizer: runtime.engine gemma4 (the fake engines have none)");
  const std::filesystem::path dir(r.policy.model_name);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json", ec) && !std::filesystem::is_regular_file(dir / "tokenizer.model", ec))
    return refused("policy.model_name: " + r.policy.model_name + " has neither tokenizer.json nor tokenizer.model, which " +
                   why + " needs");
  auto t = tokenizer::tokenizer::load_model(dir);
  if (!t) return refused("policy.model_name: " + t.error().message);
  return std::make_shared<const tokenizer::tokenizer>(std::move(t.value()));
}

/// Adds a prompt of `tokens` with `answer` to `set`, or counts it skipped when too long.
void add_prompt(prompt_set& set, std::vector<std::int32_t> tokens, std::string answer, std::int64_t max_length) {
  ++set.records;
  if (static_cast<std::int64_t>(tokens.size()) > max_length) {
    ++set.skipped;
    return;
  }
  set.tokens.push_back(std::move(tokens));
  set.answers.push_back(std::move(answer));
}

/// `text` through the tokenizer with its template (Gemma's adds <bos>); `where` names it.
gpu::result<std::vector<std::int32_t>> prompt_ids(const tokenizer::tokenizer& t, const std::string& text,
                                                  const std::string& where) {
  auto ids = t.encode(text, true);
  if (!ids) return refused(where + ": " + ids.error().message);
  if (ids->empty()) return refused(where + ": the prompt has no tokens");
  return std::move(ids.value());
}

gpu::result<prompt_set> dataset_set(const config::recipe_config& r, const char* key, const std::string& path,
                                    const tokenizer::tokenizer& t, std::int32_t vocab) {
  auto records = data::read_prompt_dataset(path);
  if (!records) return refused(std::string(key) + ": " + records.error().message);
  prompt_set set;
  set.source = path;
  bool chat_checked = false;  // the tokenizer's chat tokens, checked at the first conversation
  for (auto& x : records.value()) {
    const std::string where = std::string(key) + ": " + path + ":" + std::to_string(x.line);
    std::vector<std::int32_t> ids;
    if (x.prompt) {
      auto e = prompt_ids(t, *x.prompt, where);
      if (!e) return e.error();
      ids = std::move(e.value());
    } else if (x.input_ids) {
      ids = std::move(*x.input_ids);
    } else {
      if (!chat_checked)
        if (auto problem = data::chat_token_problem(t, data::chat_options{})) return refused(where + ": " + *problem);
      chat_checked = true;
      auto e = data::chat_ids(t, x.messages, data::chat_options{});
      if (!e) return refused(where + ": " + e.error().message);
      ids = std::move(e.value());
    }
    // A tokenizer larger than the model's embedding, or a pre-tokenized id beyond it, is caught here.
    for (const auto id : ids)
      if (id < 0 || id >= vocab)
        return refused(where + ": " + (x.input_ids ? std::string("input_ids holds ") : std::string("the prompt's tokens hold ")) +
                       std::to_string(id) + ", outside the model's vocabulary of " + std::to_string(vocab) + " tokens");
    add_prompt(set, std::move(ids), std::move(x.answer), r.data.max_input_seq_length);
  }
  if (set.tokens.empty())
    return refused(std::string(key) + ": " + path + ": every one of its " + std::to_string(set.records) +
                   " records is longer than data.max_input_seq_length (" + std::to_string(r.data.max_input_seq_length) +
                   " tokens)");
  return set;
}

gpu::result<prompt_set> arithmetic_set(const config::recipe_config& r, const std::vector<environments::arithmetic_problem>& problems,
                                       std::string source, const tokenizer::tokenizer& t) {
  prompt_set set;
  set.source = std::move(source);
  for (const auto& p : problems) {
    auto ids = prompt_ids(t, p.question, "env.name: arithmetic: the problem \"" + p.question + "\"");
    if (!ids) return ids.error();
    add_prompt(set, std::move(ids.value()), p.answer, r.data.max_input_seq_length);
  }
  if (set.tokens.empty())
    return refused("data.max_input_seq_length: " + std::to_string(r.data.max_input_seq_length) + " tokens leaves none of " +
                   set.source + " (" + std::to_string(set.records) + " of them)");
  return set;
}

/// The scoring function of a text task: the response's text (special tokens left out) judged by `judge`.
template <class Judge>
scoring_function text_scoring(tokenizer_ptr t, Judge judge) {
  return [t = std::move(t), judge = std::move(judge)](const trajectory& x) -> caf::expected<env_feedback> {
    env_feedback out;
    auto text = t->decode(x.tokens, true);
    out.reward = text ? judge(*text, x.answer) : 0.0;  // an id without text: not an answer
    return out;
  };
}

}  // namespace

gpu::result<run_task> load_run_task(const config::recipe_config& r) {
  const bool validates = r.grpo.val_period > 0 || r.grpo.val_at_start || r.grpo.val_at_end;
  run_task task;
  auto score = reward_for(r);  // parity and external; text tasks replace it below
  if (!text_task(r)) {
    auto training = training_prompts(r);
    if (!training) return training.error();
    task.training.tokens = std::move(training.value());
    task.training.source = "the parity task";
    task.training.records = task.training.tokens.size();
    if (validates) {
      auto v = validation_prompts(r);
      if (!v) return v.error();
      task.validation.emplace();
      task.validation->tokens = std::move(v.value());
      task.validation->source = "the parity task's held-out prompts";
      task.validation->records = task.validation->tokens.size();
    }
    if (r.sft.max_num_steps > 0)
      return refused("sft.max_num_steps: the warm-up trains on answers, which the parity task has none of (env.name "
                     "arithmetic or a data.train_dataset)");
    if (!score) return score.error();
    task.score = std::move(score.value());
    return task;
  }

  const std::string why = r.data.train_dataset ? "data.train_dataset" : std::string("env.name ") +
                                                     (r.env.name == environment_kind::math ? "math" : "arithmetic");
  auto t = model_tokenizer(r, why);
  if (!t) return t.error();
  auto model = gpu::load_model_config(r.policy.model_name);
  if (!model) return refused("policy.model_name: " + model.error().message());
  const auto vocab = static_cast<std::int32_t>(model->vocab_size);

  if (r.data.train_dataset) {
    auto set = dataset_set(r, "data.train_dataset", *r.data.train_dataset, **t, vocab);
    if (!set) return set.error();
    task.training = std::move(set.value());
    if (validates && r.data.validation_dataset) {
      auto v = dataset_set(r, "data.validation_dataset", *r.data.validation_dataset, **t, vocab);
      if (!v) return v.error();
      task.validation = std::move(v.value());
    } else if (validates) {
      return refused("data.validation_dataset: the recipe validates (grpo.val_period, val_at_start or val_at_end) over "
                     "a dataset of its own: name one, or turn validation off");
    }
  } else if (r.env.name == environment_kind::arithmetic) {
    const auto split = environments::arithmetic_problems(static_cast<std::uint64_t>(r.grpo.seed), r.env.arithmetic.max_operand,
                                                         validates ? static_cast<std::size_t>(r.grpo.max_val_samples) : 0);
    if (split.training.empty())
      return refused("grpo.max_val_samples: " + std::to_string(r.grpo.max_val_samples) + " held-out problems leave none of the " +
                     std::to_string(split.validation.size()) + " problems of env.arithmetic.max_operand " +
                     std::to_string(r.env.arithmetic.max_operand) + " to train on");
    auto set = arithmetic_set(r, split.training, "the arithmetic task's training problems", **t);
    if (!set) return set.error();
    task.training = std::move(set.value());
    if (validates) {
      auto v = arithmetic_set(r, split.validation, "the arithmetic task's held-out problems", **t);
      if (!v) return v.error();
      task.validation = std::move(v.value());
    }
  } else {
    return refused("env.name: math scores answers from a dataset: set data.train_dataset");
  }

  if (r.sft.max_num_steps > 0) {
    if (model->eos_token_ids.empty()) return refused("policy.model_name: the model names no eos id to end a warm-up target with");
    const auto eos = static_cast<std::int32_t>(model->eos_token_ids.front());
    for (std::size_t i = 0; i < task.training.tokens.size(); ++i) {
      auto target = (*t)->encode(task.training.answers[i], false);
      if (!target)
        return refused("sft.max_num_steps: the answer of " + task.training.source + " prompt " + std::to_string(i) + ": " +
                       target.error().message);
      target->push_back(eos);
      task.sft.push_back({task.training.tokens[i], std::move(target.value())});
    }
  }

  switch (r.env.name) {
    case environment_kind::arithmetic:
      task.score = text_scoring(*t, [](const std::string& text, const std::string& answer) {
        return environments::arithmetic_reward(text, answer);
      });
      break;
    case environment_kind::math:
      if (r.env.math.checker == config::math_checker::strict_boxed)
        task.score = text_scoring(*t, [](const std::string& text, const std::string& answer) {
          return environments::check_strict_boxed(text, answer).correct ? 1.0 : 0.0;
        });
      else
        task.score = text_scoring(*t, [](const std::string& text, const std::string& answer) {
          return environments::check_answer_line(text, answer).correct ? 1.0 : 0.0;
        });
      break;
    case environment_kind::parity:
    case environment_kind::external:
      if (!score) return score.error();
      task.score = std::move(score.value());
      break;
  }
  return task;
}

std::vector<std::string> skipped_prompt_notes(const run_task& task, const config::recipe_config& recipe) {
  std::vector<std::string> out;
  auto note = [&](const prompt_set& s) {
    if (s.skipped == 0) return;
    out.push_back(std::to_string(s.skipped) + " of " + std::to_string(s.records) + " prompts of " + s.source +
                  " are longer than data.max_input_seq_length (" + std::to_string(recipe.data.max_input_seq_length) +
                  " tokens) and left out");
  };
  note(task.training);
  if (task.validation) note(*task.validation);
  return out;
}

}  // namespace tandem
