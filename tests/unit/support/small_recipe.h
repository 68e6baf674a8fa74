// A small runnable recipe for unit tests: 16 rollouts of at most 32 tokens on one CPU device, on the
// fake engines, with any dotted overrides on top.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "orchestration/config/resolve.h"
#include "support/temp_dir.h"

namespace tandem::test {

inline config::recipe_config small_recipe(const std::vector<std::string>& overrides = {}) {
  temp_dir d;
  const auto file = d.write("r.yaml",
                            "grpo:\n  num_prompts_per_step: 4\n  num_generations_per_prompt: 4\n"
                            "policy:\n  model_name: tiny-all\n  train_global_batch_size: 16\n  max_total_sequence_length: 32\n"
                            "  generation:\n    max_new_tokens: 16\ndata:\n  max_input_seq_length: 16\n"
                            "cluster:\n  backend: cpu\n  gpus_per_node: 1\nruntime:\n  engine: fake\n");
  const config::resolution r = config::resolve_recipe(file, overrides);
  BOOST_TEST_REQUIRE(r.errors.empty(), config::to_string(r.errors));
  return r.recipe->config;
}

}  // namespace tandem::test
