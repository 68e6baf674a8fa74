// The engine factory (engine_factory.hpp): the one place that builds engines, the fake ones and
// the Gemma 4 CPU ones, and hands out the parity task.
#include "actors/runtime/engine_factory.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "actors/environment/external_environment.hpp"
#include "actors/runtime/device_turns.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "gpu/core/device_query.h"
#include "gpu/core/exec_context.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "gpu/engine/parity_task.h"
#include "gpu/model/kv_cache.h"
#include "orchestration/topology/memory_plan.h"

namespace tandem {
namespace {

/// policy.refit.receive as the generate engines take it.
gpu::refit_receive generator_receive(const config::recipe_config& recipe) {
  return recipe.policy.refit.receive == config::refit_receive_mode::in_place ? gpu::refit_receive::in_place
                                                                              : gpu::refit_receive::staging;
}

/// Prompts in the parity task's set (the driver cycles through them).
constexpr std::size_t parity_prompt_count = 64;

/// What the validation set's seed differs from grpo.seed by (validation_prompts).
constexpr std::uint64_t validation_seed_mask = 0x76616C6964617465ull;  // "validate"

gpu::status not_built(const std::string& what) { return {gpu::status_code::unsupported, what}; }
gpu::status refused(const std::string& what) { return {gpu::status_code::invalid_argument, what}; }

/// The fake model of runtime.engine fake: runtime.fake_weight_mb of weights in 8 tensors,
/// initialised from grpo.seed, a 64-token vocabulary, policy.max_total_sequence_length.
gpu::fake_model_options fake_model_of(const config::recipe_config& recipe) {
  gpu::fake_model_options o;
  o.weight_bytes = recipe.runtime.fake_weight_mb << 20;
  o.tensors = 8;
  o.seed = static_cast<std::uint64_t>(recipe.grpo.seed);
  o.vocab = 64;
  o.max_sequence_length = static_cast<std::int32_t>(recipe.policy.max_total_sequence_length);
  return o;
}

const char* name_of(config::environment_kind e) {
  switch (e) {
    case config::environment_kind::parity: return "parity";
    case config::environment_kind::arithmetic: return "arithmetic";
    case config::environment_kind::math: return "math";
    case config::environment_kind::external: return "external";
  }
  return "?";
}

/// The weights' and activations' storage of the Gemma 4 engines: policy.precision (float32 on the
/// CPU, the reference; bfloat16 on CUDA unless the recipe asks for float32).
gpu::dtype weight_dtype(const config::recipe_config& recipe) {
  return config::compute_dtype(recipe) == config::state_dtype::bfloat16 ? gpu::dtype::bfloat16 : gpu::dtype::float32;
}

}  // namespace

gpu::result<gpu::exec_context> member_context(const config::recipe_config& recipe, std::int64_t device_index) {
  if (recipe.cluster.backend == config::compute_backend::cpu) return gpu::exec_context::cpu();
  const gpu::backend_info b = gpu::query_backend();
  const std::string where = "cluster.backend: cuda: this member is placed on device " + std::to_string(device_index) +
                            " of its node";
  if (!b.cuda_built) return not_built(where + ", but this build of tandem has no CUDA backend (build it with the CUDA toolkit)");
  if (device_index < 0 || device_index >= static_cast<std::int64_t>(b.devices.size()))
    return refused(where + ", but this process sees " + std::to_string(b.devices.size()) + " CUDA device" +
                   (b.devices.size() == 1 ? "" : "s") + (b.device_problem.empty() ? "" : " (" + b.device_problem + ")"));
  gpu::exec_context ctx;
  ctx.dev = gpu::device::cuda(static_cast<int>(device_index));
  return ctx;
}

namespace {

/// A train engine whose deleter keeps `keep` (what the engine reads through a raw pointer: its
/// data-parallel group) alive as long as the engine, so a member that ends mid-step never leaves
/// an engine call on a freed group.
template <class Engine, class Keep>
std::shared_ptr<Engine> holding(std::unique_ptr<Engine> engine, Keep keep) {
  return std::shared_ptr<Engine>(engine.release(), [keep = std::move(keep)](Engine* e) { delete e; });
}

/// stop_token_ids null with the Gemma 4 engines: every request also ends at the model's eos ids.
/// Everything else passes straight to the generator.
class with_eos_stops final : public gpu::generate_engine {
 public:
  with_eos_stops(std::shared_ptr<gpu::generate_engine> inner, std::vector<std::int32_t> eos)
      : inner_(std::move(inner)), eos_(std::move(eos)) {}

  gpu::status submit(std::span<const gpu::generation_request> requests) override {
    std::vector<gpu::generation_request> stopped(requests.begin(), requests.end());
    for (auto& r : stopped)
      for (const std::int32_t id : eos_)
        if (std::find(r.stop_tokens.begin(), r.stop_tokens.end(), id) == r.stop_tokens.end()) r.stop_tokens.push_back(id);
    return inner_->submit(stopped);
  }
  gpu::result<std::int64_t> step() override { return inner_->step(); }
  std::vector<gpu::finished_sequence> collect() override { return inner_->collect(); }
  std::uint64_t weight_version() const override { return inner_->weight_version(); }
  gpu::status begin_weight_update(std::uint64_t version) override { return inner_->begin_weight_update(version); }
  gpu::status import_bucket(std::size_t index, std::span<const std::byte> bytes) override {
    return inner_->import_bucket(index, bytes);
  }
  gpu::status commit_weight_update() override { return inner_->commit_weight_update(); }
  void abort_weight_update() override { inner_->abort_weight_update(); }
  gpu::refit_receive receive() const override { return inner_->receive(); }
  bool has_live_weights() const override { return inner_->has_live_weights(); }
  gpu::status share_weights(const gpu::weight_source& source) override { return inner_->share_weights(source); }
  bool shares_weights() const override { return inner_->shares_weights(); }
  gpu::status bump_weight_version(std::uint64_t version) override { return inner_->bump_weight_version(version); }
  gpu::status release_cache() override { return inner_->release_cache(); }
  gpu::status restore_cache() override { return inner_->restore_cache(); }
  bool cache_resident() const override { return inner_->cache_resident(); }

 private:
  std::shared_ptr<gpu::generate_engine> inner_;
  std::vector<std::int32_t> eos_;
};

/// The eos ids of `c` inside its vocabulary.
std::vector<std::int32_t> eos_ids(const gpu::model_config& c) {
  std::vector<std::int32_t> out;
  for (const std::int64_t id : c.eos_token_ids)
    if (id >= 0 && id < c.vocab_size) out.push_back(static_cast<std::int32_t>(id));
  return out;
}

/// The KL term needs the reference policy's logprobs.
bool wants_reference(const config::recipe_config& recipe) { return recipe.loss_fn.reference_policy_kl_penalty > 0; }

/// Bytes per element of an optimizer state dtype.
std::int64_t state_bytes(gpu::dtype t) { return static_cast<std::int64_t>(gpu::size_of(t)); }

gpu::result<member_engines> make_fake_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                              std::shared_ptr<gpu::communicator> data_parallel,
                                              const gpu::train_engine_options& train) {
  const gpu::fake_model_options model = fake_model_of(recipe);
  if (gpu::status s = gpu::check_fake_model_options(model); !s) return s;
  member_engines out;
  out.data_parallel = std::move(data_parallel);
  std::shared_ptr<gpu::fake_train_engine> trainer;
  if (policy) {
    trainer = holding(std::make_unique<gpu::fake_train_engine>(model, train, out.data_parallel.get()), out.data_parallel);
    out.train = trainer;
    out.weights_digest = [trainer] { return trainer->weights_digest(); };
    if (wants_reference(recipe)) {
      out.reference = std::make_shared<gpu::fake_train_engine>(model, train, nullptr);
      if (gpu::status s = out.reference->offload_state(); !s) return s;
    }
  } else {
    out.weights_digest = [] { return std::uint64_t{0}; };
  }
  if (rollout) {
    gpu::fake_generate_options g;
    g.model = model;
    g.max_num_sequences = static_cast<std::int32_t>(recipe.policy.generation.max_num_sequences);
    g.bucket_bytes = refit_bucket_bytes(recipe);
    g.verify_checksums = false;  // the rollout worker checks every bucket's checksum itself
    g.receive = generator_receive(recipe);
    auto generator = std::make_shared<gpu::fake_generate_engine>(g);
    out.rollout_layout = generator->manifest();
    out.generate = generator;
    if (trainer && recipe.policy.generation.colocated) {
      const auto shared = [&]() -> gpu::result<std::shared_ptr<gpu::generate_engine>> {
        if (gpu::status s = generator->share_weights(trainer->shared_weights()); !s) return s;
        return std::shared_ptr<gpu::generate_engine>(generator);
      };
      auto turns = device_turns::create(trainer, shared, gpu::exec_context::cpu(), recipe.policy.offload_optimizer_for_generation);
      if (!turns) return turns.error();
      out.turns = std::move(*turns);
    }
  }
  return out;
}

gpu::result<member_engines> make_gemma4_engines(const config::recipe_config& recipe, const gpu::exec_context& ctx, bool policy,
                                                bool rollout, std::shared_ptr<gpu::communicator> data_parallel,
                                                const gpu::train_engine_options& train) {
  const bool colocated = policy && rollout && recipe.policy.generation.colocated;
  member_engines out;
  out.data_parallel = std::move(data_parallel);
  std::shared_ptr<gpu::gemma4_train_engine> trainer;
  out.weights_digest = [] { return std::uint64_t{0}; };
  if (policy) {
    auto source = open_policy_checkpoint(recipe);
    if (!source) return source.error();
    auto engine = gpu::gemma4_train_engine::create(ctx, std::move(*source), train, out.data_parallel.get());
    if (!engine) return refused("policy.model_name: " + recipe.policy.model_name + ": the train engine: " + engine.error().message());
    trainer = holding(std::move(*engine), out.data_parallel);
    out.train = trainer;
    out.weights_digest = [trainer] { return trainer->weights_digest(); };
    if (wants_reference(recipe)) {
      auto again = open_policy_checkpoint(recipe);
      if (!again) return again.error();
      auto reference = gpu::gemma4_train_engine::create(ctx, std::move(*again), train, nullptr);
      if (!reference)
        return refused("policy.model_name: " + recipe.policy.model_name + ": the reference policy: " + reference.error().message());
      out.reference = std::shared_ptr<gpu::gemma4_train_engine>(std::move(*reference));
      if (gpu::status s = out.reference->offload_state(); !s) return s;
    }
  }
  if (rollout) {
    const auto make_generator = [&]() -> gpu::result<std::shared_ptr<gpu::generate_engine>> {
      auto source = open_policy_checkpoint(recipe);
      if (!source) return source.error();
      auto options = generate_settings(recipe, *source, colocated);
      if (!options) return options.error();
      const std::vector<std::int32_t> eos = eos_ids(source->config);
      // Colocated, it reads the trainer's weights in place from the start: no copy is loaded.
      auto engine = colocated ? gpu::gemma4_generate_engine::create_sharing(ctx, std::move(*source), trainer->shared_weights(), *options)
                              : gpu::gemma4_generate_engine::create(ctx, std::move(*source), *options);
      if (!engine)
        return refused("policy.model_name: " + recipe.policy.model_name + ": the generate engine: " + engine.error().message());
      out.rollout_layout = (*engine)->manifest();
      std::shared_ptr<gpu::generate_engine> generator;
      if (colocated)
        generator = holding(std::move(*engine), trainer);  // it reads the trainer's weights: the trainer outlives it
      else
        generator = std::shared_ptr<gpu::gemma4_generate_engine>(std::move(*engine));
      if (!recipe.policy.generation.stop_token_ids && !eos.empty())
        generator = std::make_shared<with_eos_stops>(std::move(generator), eos);
      return generator;
    };
    if (!colocated) {
      auto generator = make_generator();
      if (!generator) return generator.error();
      out.generate = std::move(*generator);
      return out;
    }
    auto turns = device_turns::create(trainer, make_generator, ctx, recipe.policy.offload_optimizer_for_generation);
    if (!turns) return turns.error();
    out.generate = (*turns)->generator();
    out.turns = std::move(*turns);
  }
  return out;
}

}  // namespace

gpu::result<member_engines> make_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                         std::shared_ptr<gpu::communicator> data_parallel, std::int64_t device_index) {
  const gpu::train_engine_options train = train_engine_settings(recipe);
  if (gpu::status s = gpu::check_train_engine_options("policy", train); !s) return s;
  if (recipe.runtime.engine == config::engine_kind::fake) {
    if (recipe.cluster.backend != config::compute_backend::cpu)
      return not_built("runtime.engine: fake: the fake engines run on cluster.backend: cpu only");
    return make_fake_engines(recipe, policy, rollout, std::move(data_parallel), train);
  }
  auto ctx = member_context(recipe, device_index);
  if (!ctx) return ctx.error();
  return make_gemma4_engines(recipe, *ctx, policy, rollout, std::move(data_parallel), train);
}

gpu::result<gpu::checkpoint> open_policy_checkpoint(const config::recipe_config& recipe) {
  const std::string& name = recipe.policy.model_name;
  std::error_code ec;
  if (!std::filesystem::is_directory(name, ec))
    return refused("policy.model_name: " + name +
                   ": no such directory; the Gemma 4 engines load a local checkpoint directory (`tandem run` resolves a "
                   "path relative to the recipe, a preset or a model in the local Hugging Face cache to one before any "
                   "member starts; nothing is downloaded)");
  auto c = gpu::open_checkpoint(name, weight_dtype(recipe));
  if (!c) return refused("policy.model_name: " + c.error().message());
  if (!c->files)
    return refused("policy.model_name: " + name +
                   " holds a config.json but no weights (model.safetensors, or an index and its shards): "
                   "runtime.engine gemma4 loads a checkpoint (a preset in configs/models/ is a config only)");
  return c;
}

gpu::result<gpu::gemma4_generate_options> generate_settings(const config::recipe_config& recipe, const gpu::checkpoint& model,
                                                         bool colocated_trainer) {
  const auto& p = recipe.policy;
  gpu::gemma4_generate_options o;
  o.max_num_sequences = p.generation.max_num_sequences;
  o.max_sequence_length = p.max_total_sequence_length;
  o.bucket_bytes = refit_bucket_bytes(recipe);
  o.receive = generator_receive(recipe);
  // Blocks one sequence of the longest length holds, with a fork's copy of its last block and a
  // prefix holder's partial block: the room a request needs alone.
  const std::int64_t B = o.kv_block_size;
  const std::int64_t per_sequence = (o.max_sequence_length + B - 1) / B + 2;
  const gpu::dtype stored = weight_dtype(recipe);
  const std::int64_t block = gpu::kv_block_bytes(model.config, stored, B);
  const double wanted = static_cast<double>(o.max_num_sequences) * static_cast<double>(per_sequence * block);
  // What the memory plan leaves generation: the usable share of the device, less the weights
  // (twice on a dedicated generator that stages a refit's copy), what a colocated trainer
  // keeps on the device while it generates (its gradients (the weights' dtype, zero between
  // steps), a master copy where master_weights_dtype differs from the weights' and the AdamW
  // moments, unless policy.offload_optimizer_for_generation moves them to host memory), and the
  // generator's own working memory (the head's logits and the sampler's scratch, the CUDA runtime).
  const double elements = static_cast<double>(model.layout.total_elements);
  const double width = static_cast<double>(gpu::size_of(stored));
  const gpu::train_engine_options t = train_engine_settings(recipe);
  double resident = elements * width * (colocated_trainer || o.receive == gpu::refit_receive::in_place ? 1.0 : 2.0);
  if (colocated_trainer && !p.offload_optimizer_for_generation) {
    const std::int64_t master = t.master_dtype == stored ? 0 : state_bytes(t.master_dtype);
    resident += elements * (width + static_cast<double>(state_bytes(t.first_moment_dtype) + state_bytes(t.second_moment_dtype) + master));
  }
  const double usable = p.generation.gpu_memory_utilization * recipe.cluster.device_memory_gib * 1024.0 * 1024.0 * 1024.0;
  resident += topology::generation_working_bytes(recipe, model.config.vocab_size);
  const double allowed = usable - resident;
  if (allowed < static_cast<double>(per_sequence * block)) {
    char text[512];
    std::snprintf(text, sizeof text,
                  "policy.generation.gpu_memory_utilization: %g of cluster.device_memory_gib %g leaves %.0f bytes for the "
                  "KV cache after %.0f bytes of weights%s, less than one sequence of policy.max_total_sequence_length "
                  "(%lld tokens: %lld bytes)",
                  p.generation.gpu_memory_utilization, recipe.cluster.device_memory_gib, std::max(allowed, 0.0), resident,
                  colocated_trainer ? " and training state" : " (live and staged)", static_cast<long long>(o.max_sequence_length),
                  static_cast<long long>(per_sequence * block));
    return refused(text);
  }
  o.kv_cache_bytes = static_cast<std::int64_t>(std::min(wanted, allowed));  // <= allowed < 2^50 (device_memory_gib <= 2^20)
  return o;
}

namespace {

/// `count` parity prompts of `seed` over the vocabulary of the recipe's engines.
gpu::result<std::vector<std::vector<std::int32_t>>> parity_prompt_set(const config::recipe_config& recipe,
                                                                      std::uint64_t seed, std::size_t count) {
  if (recipe.runtime.engine == config::engine_kind::fake)
    return gpu::parity_prompts(seed, count, fake_model_of(recipe).vocab);
  // The controller loads no weights: the vocabulary and the special ids come from config.json.
  auto c = gpu::load_model_config(recipe.policy.model_name);
  if (!c)
    return refused("policy.model_name: " + recipe.policy.model_name + ": the parity prompts need the model's vocabulary: " +
                   c.error().message());
  std::int64_t lowest = 0;
  for (const auto& id : {c->pad_token_id, c->bos_token_id})
    if (id) lowest = std::max(lowest, *id + 1);
  for (const std::int64_t id : c->eos_token_ids) lowest = std::max(lowest, id + 1);
  if (c->vocab_size > std::int64_t{1} << 30 || lowest >= c->vocab_size)
    return refused("policy.model_name: " + recipe.policy.model_name + ": a vocabulary of " + std::to_string(c->vocab_size) +
                   " tokens leaves no ordinary token above the special ids (pad, bos, eos) for the parity prompts");
  return gpu::parity_prompts(seed, count, static_cast<std::int32_t>(c->vocab_size), static_cast<std::int32_t>(lowest));
}

}  // namespace

gpu::result<std::vector<std::vector<std::int32_t>>> training_prompts(const config::recipe_config& recipe) {
  return parity_prompt_set(recipe, static_cast<std::uint64_t>(recipe.grpo.seed), parity_prompt_count);
}

gpu::result<std::vector<std::vector<std::int32_t>>> validation_prompts(const config::recipe_config& recipe) {
  // Held out: the training set is parity_prompts(grpo.seed, ...); the validation set is the same
  // task's prompts of another seed, grpo.seed XOR 0x76616C6964617465 ("validate" in ASCII), so
  // its stream of prompts starts elsewhere and no training prompt is drawn from it.
  const std::uint64_t seed = static_cast<std::uint64_t>(recipe.grpo.seed) ^ validation_seed_mask;
  return parity_prompt_set(recipe, seed, static_cast<std::size_t>(recipe.grpo.max_val_samples));
}

gpu::result<scoring_function> reward_for(const config::recipe_config& recipe) {
  if (recipe.env.name == config::environment_kind::external) {
    if (!recipe.env.external.command) return refused("env.name external needs env.external.command");
    external_environment_settings e;
    e.command = *recipe.env.external.command;
    e.timeout = std::chrono::seconds(recipe.env.external.timeout_s);
    e.processes = static_cast<std::size_t>(recipe.env.num_workers);
    return external_scoring(std::move(e));
  }
  if (recipe.env.name != config::environment_kind::parity)
    return refused(std::string("env.name: ") + name_of(recipe.env.name) +
                   ": a text task, scored over the model's tokenizer (load_run_task, run_task.hpp)");
  return single_turn([](std::span<const std::int32_t> generated) { return gpu::parity_reward(generated); });
}

}  // namespace tandem
