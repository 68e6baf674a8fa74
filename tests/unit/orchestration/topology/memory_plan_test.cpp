// Tests of the per-phase memory estimate (orchestration/topology/memory_plan.h) with hand-made
// model sizes: exact byte figures of parameter shards, optimizer state, the phases that keep or
// drop them, the KV cache left to generation, and the warnings.
#include "orchestration/topology/memory_plan.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

namespace tc = tandem::config;
namespace tt = tandem::topology;

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;
/// What every phase of a CUDA process holds beyond its tensors, and its name in the plan.
constexpr double runtime = tt::cuda_runtime_bytes;
const std::string runtime_item = "CUDA context, library handles and workspaces (measured)";
/// The generator's head: logits (bfloat16) and the sampler's float32 scratch for 256 rows of the
/// vocabulary of 100.
constexpr double head = 256.0 * 100 * (2 + 4);
const std::string head_item = "head logits and sampler scratch (256 rows at a time)";

/// A model of one million parameters with small, distinct activation figures.
tt::model_facts facts() {
  tt::model_facts m;
  m.name = "hand-made";
  m.parameters = 1'000'000;
  m.largest_gathered_unit = 1000;
  m.vocab_size = 100;
  m.kv_elements_per_token_full = 10;
  m.saved_activations_none = 50;
  m.saved_activations_selective = 20;
  m.saved_activations_full = 5;
  m.layer_working_activations = 30;
  return m;
}

/// cuda, 2 GiB devices, half of it for generation, float32 optimizer state, sequences of 100,
/// more running sequences than any KV cache below holds.
tc::recipe_config recipe() {
  tc::recipe_config c;
  c.policy.generation.max_num_sequences = 1 << 30;
  c.cluster.backend = tc::compute_backend::cuda;
  c.cluster.device_memory_gib = 2.0;
  c.policy.max_total_sequence_length = 100;
  c.policy.logprob_chunk_size = 10;
  c.policy.train_micro_batch_size = 2;
  c.policy.logprob_batch_size = 3;
  c.policy.recompute = tc::recompute_granularity::none;
  c.policy.offload_optimizer_for_logprob = false;
  c.policy.offload_optimizer_for_generation = true;
  c.policy.generation.gpu_memory_utilization = 0.5;
  c.policy.optimizer.master_weights_dtype = tc::state_dtype::float32;
  c.policy.optimizer.first_moment_dtype = tc::state_dtype::float32;
  c.policy.optimizer.second_moment_dtype = tc::state_dtype::float32;
  return c;
}

tt::worlds worlds(bool colocated, std::int64_t dp) {
  tt::worlds w;
  w.colocated = colocated;
  w.data_parallel_size = dp;
  w.training_devices = w.generation_devices = dp;
  return w;
}

std::vector<std::string> names(const tt::phase_budget& b) {
  std::vector<std::string> out;
  for (const auto& i : b.items) out.push_back(i.what);
  return out;
}

/// Bytes of the item called exactly `what`; -1 when the phase has no such item.
double bytes(const tt::phase_budget& b, const std::string& what) {
  for (const auto& i : b.items)
    if (i.what == what) return i.bytes;
  return -1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memory_plan_test)

BOOST_AUTO_TEST_CASE(the_parameter_shard_is_two_bytes_per_parameter_over_dp_on_cuda_and_four_on_cpu) {
  tc::recipe_config c = recipe();
  tt::memory_plan p = tt::plan_memory(c, worlds(false, 4), facts());
  BOOST_TEST(bytes(p.training, "parameters (bfloat16, 1/4 shard)") == 500'000.0);
  BOOST_TEST(bytes(p.training, "gradients (bfloat16, 1/4 shard)") == 500'000.0);
  BOOST_TEST(bytes(p.training, "gathered unit, double-buffered (1000 elements)") == 4'000.0);
  c.cluster.backend = tc::compute_backend::cpu;
  p = tt::plan_memory(c, worlds(false, 4), facts());
  BOOST_TEST(bytes(p.training, "parameters (float32, 1/4 shard)") == 1'000'000.0);
  BOOST_TEST(bytes(p.training, "gathered unit, double-buffered (1000 elements)") == 8'000.0);
  p = tt::plan_memory(c, worlds(false, 1), facts());
  BOOST_TEST(bytes(p.training, "parameters (float32)") == 4'000'000.0);
  BOOST_TEST(bytes(p.training, "gathered unit, double-buffered (1000 elements)") == 0.0);
}

BOOST_AUTO_TEST_CASE(policy_precision_float32_on_cuda_plans_float32_weights_and_activations) {
  tc::recipe_config c = recipe();
  c.policy.precision = tc::compute_precision::float32;
  const tt::memory_plan p = tt::plan_memory(c, worlds(false, 1), facts());
  BOOST_TEST(bytes(p.training, "parameters (float32)") == 4'000'000.0);
  BOOST_TEST(bytes(p.training, "gradients (float32)") == 4'000'000.0);
  BOOST_TEST(bytes(p.training, "master weights") == 0.0);  // the float32 master is the parameters
}

BOOST_AUTO_TEST_CASE(the_whole_training_phase_adds_up_item_by_item) {
  const tt::memory_plan p = tt::plan_memory(recipe(), worlds(false, 4), facts());
  BOOST_TEST(p.device_bytes == 2 * gib);
  const std::vector<std::string> expected = {"parameters (bfloat16, 1/4 shard)",
                                             "gathered unit, double-buffered (1000 elements)",
                                             "gradients (bfloat16, 1/4 shard)",
                                             "master weights, 1/4 shard",
                                             "AdamW moments, 1/4 shard",
                                             "activations (200 tokens per micro-batch)",
                                             "logits and their gradient (chunk of 10 tokens, float32)",
                                             runtime_item,
                                             "head logits kept for the backward (200 tokens, recompute none)"};
  BOOST_TEST(names(p.training) == expected, boost::test_tools::per_element());
  BOOST_TEST(bytes(p.training, "activations (200 tokens per micro-batch)") == 200.0 * 50 * 2);
  BOOST_TEST(bytes(p.training, "logits and their gradient (chunk of 10 tokens, float32)") == 2.0 * 10 * 100 * 4);
  BOOST_TEST(bytes(p.training, "head logits kept for the backward (200 tokens, recompute none)") == 200.0 * 100 * 2);
  BOOST_TEST(p.training.total_bytes() == 500'000.0 + 4'000 + 500'000 + 1'000'000 + 2'000'000 + 20'000 + 8'000 + runtime + 40'000);
  // On the CPU the device is the host: no runtime of its own.
  tc::recipe_config cpu = recipe();
  cpu.cluster.backend = tc::compute_backend::cpu;
  BOOST_TEST(bytes(tt::plan_memory(cpu, worlds(false, 4), facts()).training, runtime_item) == 0.0);
}

BOOST_AUTO_TEST_CASE(the_moments_take_the_bytes_of_their_dtypes) {
  tc::recipe_config c = recipe();
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "AdamW moments, 1/4 shard") == 2'000'000.0);
  c.policy.optimizer.first_moment_dtype = tc::state_dtype::bfloat16;
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "AdamW moments, 1/4 shard") == 1'500'000.0);
  c.policy.optimizer.second_moment_dtype = tc::state_dtype::bfloat16;
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "AdamW moments, 1/4 shard") == 1'000'000.0);
  c.policy.optimizer.first_moment_dtype = tc::state_dtype::float32;
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "AdamW moments, 1/4 shard") == 1'500'000.0);
}

BOOST_AUTO_TEST_CASE(master_weights_are_a_separate_copy_only_in_another_dtype_than_the_parameters) {
  tc::recipe_config c = recipe();  // cuda: bfloat16 parameters, a float32 master beside them
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "master weights, 1/4 shard") == 1'000'000.0);
  c.policy.optimizer.master_weights_dtype = tc::state_dtype::bfloat16;  // the parameters themselves
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "master weights, 1/4 shard") == 0.0);
  c.cluster.backend = tc::compute_backend::cpu;  // float32 parameters, a bfloat16 master beside them
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "master weights, 1/4 shard") == 500'000.0);
  c.policy.optimizer.master_weights_dtype = tc::state_dtype::float32;
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, "master weights, 1/4 shard") == 0.0);
}

BOOST_AUTO_TEST_CASE(offloading_the_optimizer_for_logprobs_removes_its_state_from_that_phase) {
  tc::recipe_config c = recipe();
  const tt::memory_plan kept = tt::plan_memory(c, worlds(false, 4), facts());
  const std::vector<std::string> with_state = {"parameters (bfloat16, 1/4 shard)",
                                               "gathered unit, double-buffered (1000 elements)",
                                               "master weights, 1/4 shard", "AdamW moments, 1/4 shard",
                                               "activations of one layer (300 tokens)", "logits (chunk, float32)",
                                               runtime_item};
  BOOST_TEST(names(kept.logprobs) == with_state, boost::test_tools::per_element());
  BOOST_TEST(bytes(kept.logprobs, "activations of one layer (300 tokens)") == 300.0 * 30 * 2);
  BOOST_TEST(bytes(kept.logprobs, "logits (chunk, float32)") == 10.0 * 100 * 4);

  c.policy.offload_optimizer_for_logprob = true;
  const tt::memory_plan offloaded = tt::plan_memory(c, worlds(false, 4), facts());
  const std::vector<std::string> without_state = {"parameters (bfloat16, 1/4 shard)",
                                                  "gathered unit, double-buffered (1000 elements)",
                                                  "activations of one layer (300 tokens)", "logits (chunk, float32)",
                                                  runtime_item};
  BOOST_TEST(names(offloaded.logprobs) == without_state, boost::test_tools::per_element());
  BOOST_TEST(kept.logprobs.total_bytes() - offloaded.logprobs.total_bytes() == 3'000'000.0);
  BOOST_TEST(offloaded.training.total_bytes() == kept.training.total_bytes());
}

BOOST_AUTO_TEST_CASE(colocated_generation_with_one_rank_shares_the_training_weights) {
  const tt::memory_plan p = tt::plan_memory(recipe(), worlds(true, 1), facts());
  const std::vector<std::string> expected = {"weights (bfloat16, shared with training)", head_item, runtime_item,
                                             "KV cache (policy.generation.gpu_memory_utilization 0.50)"};
  BOOST_TEST(names(p.generation) == expected, boost::test_tools::per_element());
  BOOST_TEST(bytes(p.generation, "weights (bfloat16, shared with training)") == 2'000'000.0);
  BOOST_TEST(bytes(p.generation, head_item) == head);
  BOOST_TEST(bytes(p.generation, runtime_item) == runtime);
}

BOOST_AUTO_TEST_CASE(colocated_generation_with_several_ranks_adds_the_resident_training_shard) {
  tc::recipe_config c = recipe();
  tt::memory_plan p = tt::plan_memory(c, worlds(true, 4), facts());
  const std::vector<std::string> expected = {"weights (bfloat16, full copy)", "training parameters, 1/4 shard, resident",
                                             head_item, runtime_item,
                                             "KV cache (policy.generation.gpu_memory_utilization 0.50)"};
  BOOST_TEST(names(p.generation) == expected, boost::test_tools::per_element());
  BOOST_TEST(bytes(p.generation, "weights (bfloat16, full copy)") == 2'000'000.0);
  BOOST_TEST(bytes(p.generation, "training parameters, 1/4 shard, resident") == 500'000.0);

  // Optimizer state stays on the device while generating unless it is offloaded.
  c.policy.offload_optimizer_for_generation = false;
  p = tt::plan_memory(c, worlds(true, 4), facts());
  BOOST_TEST(bytes(p.generation, "master weights, 1/4 shard") == 1'000'000.0);
  BOOST_TEST(bytes(p.generation, "AdamW moments, 1/4 shard") == 2'000'000.0);
}

BOOST_AUTO_TEST_CASE(dedicated_generation_holds_a_full_copy_and_no_training_state) {
  tc::recipe_config c = recipe();
  c.policy.offload_optimizer_for_generation = false;
  const tt::memory_plan p = tt::plan_memory(c, worlds(false, 4), facts());
  const std::vector<std::string> expected = {"weights (bfloat16, full copy)",
                                             "refit staging copy (bfloat16, policy.refit.receive staging)", head_item,
                                             runtime_item, "KV cache (policy.generation.gpu_memory_utilization 0.50)"};
  BOOST_TEST(names(p.generation) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_dedicated_generator_plans_a_staging_copy_unless_it_receives_in_place) {
  tc::recipe_config c = recipe();
  const tt::memory_plan staged = tt::plan_memory(c, worlds(false, 4), facts());
  BOOST_TEST(bytes(staged.generation, "refit staging copy (bfloat16, policy.refit.receive staging)") == 2'000'000.0);
  c.policy.refit.receive = tc::refit_receive_mode::in_place;
  const tt::memory_plan in_place = tt::plan_memory(c, worlds(false, 4), facts());
  const std::vector<std::string> expected = {"weights (bfloat16, full copy)", head_item, runtime_item,
                                             "KV cache (policy.generation.gpu_memory_utilization 0.50)"};
  BOOST_TEST(names(in_place.generation) == expected, boost::test_tools::per_element());
  BOOST_TEST(in_place.kv_cache_bytes == staged.kv_cache_bytes + 2'000'000.0, "the KV cache gets the copy's room");
  // Colocated generators receive no buckets: the same plan either way.
  BOOST_TEST(tt::plan_memory(c, worlds(true, 1), facts()).generation.total_bytes() ==
             tt::plan_memory(recipe(), worlds(true, 1), facts()).generation.total_bytes());
}

BOOST_AUTO_TEST_CASE(the_kv_cache_gets_the_usable_memory_minus_the_rest_of_generation) {
  const tt::memory_plan p = tt::plan_memory(recipe(), worlds(true, 4), facts());
  const double kv = 0.5 * 2 * gib - 2'000'000.0 - 500'000.0 - head - runtime;
  BOOST_TEST(p.kv_cache_bytes == kv);
  BOOST_TEST(bytes(p.generation, "KV cache (policy.generation.gpu_memory_utilization 0.50)") == kv);
  BOOST_TEST(p.kv_cache_tokens == kv / (10.0 * 2), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(p.generation.total_bytes() == 0.5 * 2 * gib);
  BOOST_TEST(p.warnings.empty());
}

BOOST_AUTO_TEST_CASE(the_kv_cache_holds_no_more_than_max_num_sequences_sequences_of_the_longest_length) {
  tc::recipe_config c = recipe();
  c.policy.generation.max_num_sequences = 64;  // 64 x 100 tokens x 10 elements x 2 bytes
  const tt::memory_plan p = tt::plan_memory(c, worlds(true, 4), facts());
  BOOST_TEST(p.kv_cache_bytes == 128'000.0);
  BOOST_TEST(bytes(p.generation, "KV cache (policy.generation.gpu_memory_utilization 0.50)") == 128'000.0);
  BOOST_TEST(p.kv_cache_sequences == 64.0);
  // A full copy, the training shard, the head of 64 rows (the most that run at once) and the runtime.
  BOOST_TEST(bytes(p.generation, "head logits and sampler scratch (64 rows at a time)") == 64.0 * 100 * 6);
  BOOST_TEST(p.generation.total_bytes() == 2'000'000.0 + 500'000.0 + 64.0 * 100 * 6 + runtime + 128'000.0);
}

BOOST_AUTO_TEST_CASE(phases_larger_than_the_device_and_a_kv_cache_without_room_are_warned_about) {
  tc::recipe_config c = recipe();
  tt::model_facts m = facts();
  m.parameters = 536'870'912;  // 2^29: training holds 16 bytes each (8 GiB), logprobs 14 (7 GiB)
  const tt::memory_plan p = tt::plan_memory(c, worlds(false, 1), m);
  BOOST_TEST(p.kv_cache_bytes < 0.0);  // the bfloat16 copy (1 GiB) fills the usable half; the head and runtime overflow it
  BOOST_TEST(p.kv_cache_tokens == 0.0);
  const std::vector<std::string> expected = {
      "training needs 8.60 GiB per device, more than its 2.00 GiB (cluster.device_memory_gib)",
      "logprobs needs 7.60 GiB per device, more than its 2.00 GiB (cluster.device_memory_gib)",
      "generation leaves room for 0 KV-cache tokens, less than one sequence of policy.max_total_sequence_length (100)"};
  BOOST_TEST(p.warnings == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_kv_cache_shorter_than_one_sequence_is_the_only_warning) {
  tt::model_facts m = facts();
  m.kv_elements_per_token_full = 16'777'216;  // 32 MiB per bfloat16 token: 12.7 tokens fit
  const tt::memory_plan p = tt::plan_memory(recipe(), worlds(false, 4), m);
  // The weights and the refit's staging copy (2 x 2 MB), the head and the runtime.
  BOOST_TEST(p.kv_cache_tokens == (0.5 * 2 * gib - 2 * 2'000'000.0 - head - runtime) / (16'777'216.0 * 2),
             boost::test_tools::tolerance(1e-12));
  const std::vector<std::string> expected = {
      "generation leaves room for 12 KV-cache tokens, less than one sequence of policy.max_total_sequence_length (100)"};
  BOOST_TEST(p.warnings == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(sliding_window_layers_cache_at_most_the_window_of_each_sequence) {
  tt::model_facts m = facts();
  m.kv_elements_per_token_sliding = 40;
  m.sliding_window = 25;  // sequences of 100 tokens: 100 x 10 + 25 x 40 = 2000 elements each
  const tt::memory_plan p = tt::plan_memory(recipe(), worlds(true, 4), m);
  BOOST_TEST(p.kv_cache_sequences == p.kv_cache_bytes / (2000.0 * 2), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(p.kv_cache_tokens == p.kv_cache_sequences * 100, boost::test_tools::tolerance(1e-12));
  m.sliding_window = 1000;  // a window longer than the sequence caches the whole sequence
  const tt::memory_plan q = tt::plan_memory(recipe(), worlds(true, 4), m);
  BOOST_TEST(q.kv_cache_sequences == q.kv_cache_bytes / (5000.0 * 2), boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(recompute_keeps_fewer_activations_per_token) {
  tc::recipe_config c = recipe();
  c.policy.recompute = tc::recompute_granularity::selective;
  const std::string item = "activations (200 tokens per micro-batch)";
  const std::string logits = "head logits kept for the backward (200 tokens, recompute none)";
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, item) == 200.0 * 20 * 2);
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, logits) == -1.0);  // recomputed instead
  c.policy.recompute = tc::recompute_granularity::full;  // layer inputs plus one layer's working set
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, item) == 200.0 * (5 + 30) * 2);
  BOOST_TEST(bytes(tt::plan_memory(c, worlds(false, 4), facts()).training, logits) == -1.0);
}

BOOST_AUTO_TEST_SUITE_END()
