// The recipe rules under extreme integers and floats: whatever a recipe sets, either validation
// refuses it or every number derived from it is exact and fits the type it travels in. No overflow
// reaches a plan (placement, memory, frame limit) or the wire (32-bit steps, ranks, token ids,
// heartbeat milliseconds, packed-batch offsets).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "orchestration/config/checked_int.h"
#include "orchestration/config/resolve.h"
#include "orchestration/config/schema.h"
#include "orchestration/control/codec.hpp"
#include "orchestration/control/frame_limits.hpp"
#include "orchestration/topology/memory_plan.h"
#include "orchestration/topology/placement.h"
#include "support/temp_dir.h"

using namespace tandem::config;
using tandem::test::temp_dir;
__extension__ typedef __int128 i128;  // exact products of two int64 values

namespace {

const std::vector<std::string> extreme_integers = {
    "-9223372036854775808", "-9223372036854775807", "-4294967296", "-1", "0", "1", "2", "3", "7", "64",
    "65535", "65536", "16777216", "16777217", "2147483647", "2147483648", "4294967295", "4294967296",
    "68719476736", "68719476737", "4611686018427387904", "9007199254740993", "9223372036854775807"};
const std::vector<std::string> extreme_reals = {"-1.0e308", "-1.0", "-0.0", "0.0", "5.0e-324", "1.0e-300", "0.5",
                                                "1.0", "1.5", "1.0e18", "1.7976931348623157e308"};

/// A tiny model for the memory plan.
tandem::topology::model_facts tiny_facts() {
  tandem::topology::model_facts m;
  m.name = "tiny";
  m.num_layers = 2;
  m.hidden_size = 64;
  m.vocab_size = 256;
  m.max_position_embeddings = 1 << 24;
  m.parameters = 100000;
  m.largest_gathered_unit = 20000;
  m.kv_elements_per_token_full = 128;
  m.kv_elements_per_token_sliding = 128;
  m.sliding_window = 512;
  m.saved_activations_none = 1000;
  m.saved_activations_selective = 500;
  m.saved_activations_full = 100;
  m.layer_working_activations = 300;
  return m;
}

bool fits_i32(std::int64_t v) { return v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max(); }
bool fits_u32(std::int64_t v) { return v >= 0 && v <= std::numeric_limits<std::uint32_t>::max(); }

/// Every invariant a resolved recipe must hold; names the first broken one.
void check_derived(const recipe_config& c, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    const i128 rollouts = static_cast<i128>(c.grpo.num_prompts_per_step) * c.grpo.num_generations_per_prompt;
    BOOST_TEST((rollouts > 0 && rollouts <= (i128{1} << 36)));
    BOOST_TEST((rollouts * c.policy.max_total_sequence_length <= max_packed_tokens));  // packed offsets are int32
    BOOST_TEST(fits_u32(c.grpo.max_num_steps));                                        // the seed's step
    BOOST_TEST(fits_u32(c.grpo.num_prompts_per_step));                                 // the seed's prompt
    BOOST_TEST(fits_u32(c.grpo.num_generations_per_prompt));                           // the seed's sample
    BOOST_TEST(fits_i32(c.policy.generation.max_new_tokens));
    BOOST_TEST(fits_i32(c.policy.max_total_sequence_length));
    BOOST_TEST(fits_i32(c.policy.generation.max_num_sequences));
    BOOST_TEST(fits_i32(c.policy.generation.top_k.value_or(0)));
    if (c.policy.generation.stop_token_ids)
      for (const auto t : *c.policy.generation.stop_token_ids) BOOST_TEST(fits_i32(t));
    BOOST_TEST(fits_u32(c.runtime.heartbeat_interval_ms));  // the welcome's 32-bit milliseconds
    BOOST_TEST(fits_u32(c.runtime.heartbeat_timeout_ms));
    BOOST_TEST(c.runtime.heartbeat_timeout_ms >= 2 * c.runtime.heartbeat_interval_ms);
    BOOST_TEST((static_cast<i128>(c.runtime.request_timeout_s) * 1000 <= std::numeric_limits<std::int32_t>::max()));
    BOOST_TEST((static_cast<i128>(c.policy.train_micro_batch_size) * c.policy.max_total_sequence_length <=
                std::numeric_limits<std::int64_t>::max()));
    BOOST_TEST(((static_cast<i128>(c.policy.refit.bucket_mb) << 20) <= std::numeric_limits<std::int64_t>::max()));
    BOOST_TEST(((static_cast<i128>(c.runtime.fake_weight_mb) << 20) <= std::numeric_limits<std::int64_t>::max()));
    // The plans: ranks fit int32, the frame limit is within the codec's, every memory figure finite.
    const auto plan = tandem::topology::plan_placement(c);
    BOOST_TEST(fits_i32(static_cast<std::int64_t>(plan.members.size())));
    BOOST_TEST((static_cast<i128>(c.cluster.num_nodes) * c.cluster.gpus_per_node == static_cast<i128>(plan.members.size())));
    const std::size_t limit = tandem::control::controller_frame_limit(c);
    BOOST_TEST((limit >= (std::size_t{16} << 20) && limit <= tandem::control::max_frame_bytes));
    const auto mem = tandem::topology::plan_memory(c, plan.sizes, tiny_facts());
    for (const auto* phase : {&mem.training, &mem.logprobs, &mem.generation})
      for (const auto& item : phase->items) BOOST_TEST(std::isfinite(item.bytes), item.what);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(extreme_values_test)

BOOST_AUTO_TEST_CASE(every_numeric_key_at_every_extreme_value_is_refused_or_leaves_every_derived_number_exact) {
  temp_dir d;
  const auto recipe = d.write("r.yaml",
                              "grpo:\n  num_prompts_per_step: 4\n  num_generations_per_prompt: 4\npolicy:\n"
                              "  model_name: tiny\n  train_global_batch_size: 16\n  max_total_sequence_length: 64\n"
                              "  generation:\n    max_new_tokens: 32\ndata:\n  max_input_seq_length: 32\n"
                              "cluster:\n  backend: cpu\n  gpus_per_node: 2\n");
  std::size_t accepted = 0, refused = 0;
  for (const key_spec& k : schema::recipes().keys()) {
    const bool integer = k.kind == value_kind::integer || k.kind == value_kind::integer_list;
    if (!integer && k.kind != value_kind::real) continue;
    for (const std::string& v : integer ? extreme_integers : extreme_reals) {
      const std::string o = k.path + "=" + (k.kind == value_kind::integer_list ? "[" + v + "]" : v);
      const resolution r = resolve_recipe(recipe, {o});
      if (!r.recipe) {
        ++refused;
        BOOST_TEST(!r.errors.empty());
        continue;
      }
      ++accepted;
      check_derived(r.recipe->config, o);
    }
  }
  BOOST_TEST(accepted > 100u);
  BOOST_TEST(refused > 100u);
}

BOOST_AUTO_TEST_CASE(random_pairs_of_extreme_values_never_overflow_a_rule_a_plan_or_the_wire) {
  temp_dir d;
  const auto recipe = d.write("r.yaml", "policy:\n  model_name: tiny\ncluster:\n  backend: cpu\n");
  std::vector<const key_spec*> numeric;
  for (const key_spec& k : schema::recipes().keys())
    if (k.kind == value_kind::integer || k.kind == value_kind::real) numeric.push_back(&k);
  std::mt19937_64 rng(20261201);
  const auto pick = [&rng](const auto& v) { return v[rng() % v.size()]; };
  // The keys whose products the rules check, chosen more often so their overflows are reached.
  const std::vector<std::string> multiplied = {"grpo.num_prompts_per_step", "grpo.num_generations_per_prompt",
                                               "policy.train_global_batch_size", "policy.train_micro_batch_size",
                                               "policy.max_total_sequence_length", "data.max_input_seq_length",
                                               "policy.generation.max_new_tokens", "cluster.num_nodes",
                                               "cluster.gpus_per_node", "runtime.heartbeat_interval_ms",
                                               "runtime.heartbeat_timeout_ms"};
  std::size_t accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> overrides;
    for (int j = 0; j < 3; ++j) {
      const key_spec* k = rng() % 2 ? schema::recipes().find(pick(multiplied)) : pick(numeric);
      overrides.push_back(k->path + "=" + pick(k->kind == value_kind::integer ? extreme_integers : extreme_reals));
    }
    const resolution r = resolve_recipe(recipe, overrides);
    if (!r.recipe) continue;
    ++accepted;
    check_derived(r.recipe->config, overrides[0] + " " + overrides[1] + " " + overrides[2]);
  }
  BOOST_TEST(accepted >= 40u);  // most triples break a rule; enough pass to exercise the plans
}

BOOST_AUTO_TEST_CASE(products_that_overflow_64_bits_are_refused_by_the_rules_naming_the_keys) {
  temp_dir d;
  const auto recipe = d.write("r.yaml", "policy:\n  model_name: tiny\ncluster:\n  backend: cpu\n");
  const resolution r = resolve_recipe(recipe, {"grpo.num_prompts_per_step=1048576", "grpo.num_generations_per_prompt=65536",
                                               "policy.train_global_batch_size=68719476736",
                                               "policy.max_total_sequence_length=16777216",
                                               "policy.train_micro_batch_size=1048576"});
  BOOST_TEST_REQUIRE(!r.errors.empty());
  BOOST_TEST(to_string(r.errors).find("holds more than 2147483647 tokens, the most a packed batch addresses") !=
                 std::string::npos,
             to_string(r.errors));
}

BOOST_AUTO_TEST_SUITE_END()
