// The controller's RL loop (state machine in rl_loop.hpp).
#include "actors/controller/rl_loop.hpp"

#include <chrono>
#include <cstdio>
#include <optional>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/api/error_context.hpp"
#include "actors/controller/step_metrics.hpp"
#include "actors/driver/driver.hpp"
#include "actors/environment/environment.hpp"
#include "actors/refit_coordinator/refit_coordinator.hpp"
#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "orchestration/rl/step_settings.h"

namespace tandem {
namespace {

using json = nlohmann::json;

struct rl_loop_state {
  static inline const char* name = "rl_loop";

  rl_loop_settings s;
  refit_coordinator_actor coordinator;
  environment_actor environment;
  driver_actor driver;
  std::int64_t steps = 0;
  std::int64_t done = 0;
  bool stop_requested = false;  // rl_stop: no step starts after the one in flight
  std::chrono::steady_clock::time_point started;
  bool finished = false;
  step_metric_settings metric_settings;
};

using loop_ptr = caf::stateful_actor<rl_loop_state>*;

void say(loop_ptr self, const std::string& line) {
  if (self->state.s.report) self->state.s.report(line);
}

void finish(loop_ptr self, bool ok, const std::string& message) {
  auto& st = self->state;
  if (st.finished) return;
  st.finished = true;
  self->send(st.s.listener, rl_done_atom::value, ok, message);
}

json trajectory_record(const step_report& r, std::size_t i, std::uint64_t seed) {
  const trajectory& t = r.trajectories[i];
  return json{{"step", r.step + 1},
              {"id", t.id},
              {"rng", {{"seed", seed}, {"step", r.step}, {"round", 0}, {"prompt", t.prompt_index}, {"sample", t.sample_index}}},
              {"prompt_index", t.prompt_index},
              {"sample_index", t.sample_index},
              {"prompt", t.prompt},
              {"tokens", t.tokens},
              {"finish", t.reason == gpu::finish_reason::stop_token ? "stop" : "length"},
              {"version", t.version},
              {"rollout_worker", t.worker},
              {"raw_reward", i < r.raw_rewards.size() ? r.raw_rewards[i] : 0.0},
              {"reward", i < r.rewards.size() ? r.rewards[i] : 0.0},
              {"advantage", i < r.advantages.size() ? r.advantages[i] : 0.0}};
}

socket_thread::traffic_counts minus(const socket_thread::traffic_counts& a, const socket_thread::traffic_counts& b) {
  return {a.sent_bytes - b.sent_bytes, a.received_bytes - b.received_bytes, a.heartbeat_bytes - b.heartbeat_bytes};
}

std::string digests_text(const step_report& r) {
  if (r.weights_digests.empty() || r.weights_digests.front() == 0) return "";
  bool same = true;
  for (const auto d : r.weights_digests) same = same && d == r.weights_digests.front();
  return ", weights " + digest_hex(r.weights_digests.front()) + (same ? " on every policy rank" : " (ranks differ)");
}

/// The step's trajectories, then its metrics record; the first record that cannot be written (or
/// an earlier failure of controller.log) ends the run.
std::optional<records::file_error> write_records(rl_loop_state& st, const step_report& r,
                                                 const socket_thread::traffic_counts& traffic, double seconds) {
  const auto& files = st.s.records;
  if (files.generations)
    for (std::size_t i = 0; i < r.trajectories.size(); ++i)
      if (auto e = files.generations->append(trajectory_record(r, i, static_cast<std::uint64_t>(st.s.recipe.grpo.seed)).dump()))
        return e;
  const json record = step_record(r, traffic, seconds, st.metric_settings);
  if (files.metrics)
    if (auto e = files.metrics->append(record.dump())) return e;
  if (files.tensorboard)
    if (auto e = files.tensorboard->add_scalars(static_cast<std::int64_t>(r.step) + 1, scalars_of(record))) return e;
  return files.failure();
}

void next_step(loop_ptr self) {
  auto& st = self->state;
  if (st.stop_requested)
    return finish(self, true, std::to_string(st.done) + " of " + std::to_string(st.steps) + " steps done; stopped on request");
  if (st.done == st.steps) {
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - st.started).count();
    char text[128];
    std::snprintf(text, sizeof text, "%lld steps done in %.1f s", static_cast<long long>(st.done), seconds);
    return finish(self, true, text);
  }
  const auto before = st.s.socket ? st.s.socket->traffic() : socket_thread::traffic_counts{};
  const auto t0 = std::chrono::steady_clock::now();
  self->request(st.driver, caf::infinite, step_atom_v)
      .then(
          [self, before, t0](step_report& r) {
            auto& st = self->state;
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const auto traffic = st.s.socket ? minus(st.s.socket->traffic(), before) : socket_thread::traffic_counts{};
            ++st.done;
            char line[512];
            std::snprintf(line, sizeof line,
                          "step %lld/%lld: reward %.3f, loss %.4f, %lld tokens, v%llu -> v%llu live (%s refit, %zu "
                          "buckets, %lld bytes), control %llu bytes, %.2f s",
                          static_cast<long long>(st.done), static_cast<long long>(st.steps), r.reward_mean,
                          r.metrics.pg_loss + st.metric_settings.kl_beta * r.metrics.kl_penalty, static_cast<long long>(r.train_tokens),
                          static_cast<unsigned long long>(r.generated_with), static_cast<unsigned long long>(r.trained_to),
                          to_string(r.refit.mode).c_str(), r.refit.buckets, static_cast<long long>(r.refit.bytes),
                          static_cast<unsigned long long>(traffic.sent_bytes + traffic.received_bytes), seconds);
            say(self, line + digests_text(r));
            if (auto failed = write_records(st, r, traffic, seconds)) return finish(self, false, failed->message);
            next_step(self);
          },
          [self](caf::error& e) { finish(self, false, "step " + std::to_string(self->state.done + 1) + ": " + error_text(e)); });
}

caf::behavior rl_loop(loop_ptr self, rl_loop_settings s) {
  auto& st = self->state;
  st.s = std::move(s);
  const auto& recipe = st.s.recipe;
  st.steps = st.s.steps > 0 ? st.s.steps : recipe.grpo.max_num_steps;
  const auto timeout = std::chrono::milliseconds(recipe.runtime.request_timeout_s * 1000);
  // What the run trains on and how it is scored, as the engine factory derives them from the recipe
  // (`tandem run` refuses the choices not built before any process starts; this is the second line).
  auto prompts = training_prompts(recipe);
  auto reward = reward_for(recipe);
  auto rl_settings = rl::make_step_settings(recipe);
  if (!prompts || !reward || !rl_settings) {
    finish(self, false, !prompts  ? prompts.error().message()
                        : !reward ? reward.error().message()
                                  : "the recipe's GRPO settings: " + rl_settings.error().message);
    return {[](member_lost_atom, const std::string&, const std::string&) {}, [](rl_stop_atom) {}};
  }

  refit_coordinator_config rc;
  rc.mode = recipe.policy.generation.colocated ? refit_mode::colocated : refit_mode::dedicated;
  rc.policy = st.s.policy.front();
  rc.rollout = st.s.rollout;
  rc.bucket_bytes = refit_bucket_bytes(recipe);
  rc.checksums = recipe.policy.refit.checksums;
  rc.timeout = timeout;
  st.coordinator = spawn_refit_coordinator(self->system(), std::move(rc));

  environment_config ec;
  ec.workers = static_cast<std::size_t>(recipe.env.num_workers);
  ec.score = std::move(reward.value());
  ec.timeout = timeout;
  st.environment = spawn_environment(self->system(), std::move(ec));

  driver_config dc;
  dc.policy = st.s.policy;
  dc.rollout = st.s.rollout;
  dc.refit = st.coordinator;
  dc.environment = st.environment;
  dc.prompts = std::move(prompts.value());
  dc.prompts_per_step = static_cast<std::size_t>(recipe.grpo.num_prompts_per_step);
  dc.samples_per_prompt = static_cast<std::size_t>(recipe.grpo.num_generations_per_prompt);
  dc.max_new_tokens = static_cast<std::int32_t>(recipe.policy.generation.max_new_tokens);
  if (recipe.policy.generation.stop_token_ids)
    for (const auto t : *recipe.policy.generation.stop_token_ids) dc.stop_tokens.push_back(static_cast<std::int32_t>(t));
  dc.sampling = sampling_settings(recipe);
  dc.loss = loss_settings(recipe);
  dc.rewards.scaling = rl_settings->scaling;
  dc.rewards.shaping = rl_settings->shaping;
  dc.rewards.baseline = rl_settings->baseline;
  dc.rewards.advantages = rl_settings->advantages;
  dc.rewards.overlong_filtering = rl_settings->overlong_filtering;
  st.metric_settings.kl_beta = dc.loss.kl_beta;
  st.metric_settings.importance = dc.loss.importance;
  dc.micro_batch_tokens = micro_batch_token_budget(recipe);
  dc.seed = static_cast<std::uint64_t>(recipe.grpo.seed);
  dc.timeout = timeout;
  st.driver = spawn_driver(self->system(), std::move(dc));
  for (auto& a : {caf::actor_cast<caf::actor>(st.coordinator), caf::actor_cast<caf::actor>(st.environment),
                  caf::actor_cast<caf::actor>(st.driver)})
    self->link_to(a);

  st.started = std::chrono::steady_clock::now();
  self->request(st.coordinator, caf::infinite, handshake_atom_v)
      .then(
          [self](handshake_report& h) {
            say(self, "refit handshake: " + std::to_string(h.bucket_count) + " buckets of up to " +
                          std::to_string(h.bucket_bytes) + " bytes (" + std::to_string(h.total_bytes) + " in all), " +
                          to_string(h.mode) + ", v" + std::to_string(h.version) + " live on " +
                          std::to_string(h.rollout_workers.size()) + " rollout workers");
            next_step(self);
          },
          [self](caf::error& e) { finish(self, false, "refit handshake: " + error_text(e)); });
  return {
      [self](member_lost_atom, const std::string& name, const std::string& reason) {
        self->send(self->state.driver, member_lost_atom_v, name, reason);
      },
      [self](rl_stop_atom) { self->state.stop_requested = true; },
  };
}

}  // namespace

caf::actor spawn_rl_loop(caf::actor_system& sys, rl_loop_settings settings) { return sys.spawn(rl_loop, std::move(settings)); }

}  // namespace tandem
