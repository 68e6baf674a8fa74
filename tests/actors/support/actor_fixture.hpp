// Shared set-up of the actor tests: tandem's actor-system configuration with every message type
// registered, a tiny fake model (256 bytes of weights, 3 refit buckets of 96 bytes), fake
// engines, and a cluster (policy rank, rollout workers, refit coordinator, environment, driver)
// whose dedicated refits stream over an in-process refit group (gpu/comm/local_group.h: the
// policy rank is rank 0, the rollout workers ranks 1..R), as production streams over zmq_group.
// Two ways to run it: deterministically on CAF's test coordinator with engine calls inline
// (cluster_fixture: exact message order; a stream, whose broadcasts wait for every rank, is
// refused there), or on a real actor system with engine calls on their own threads
// (threaded_cluster_fixture: streams, waits with generous deadlines only). Faults are injected
// through cluster_hooks, set before start().
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/test/dsl.hpp>

#include "actors/api/error_context.hpp"
#include "actors/api/type_ids.hpp"
#include "actors/driver/driver.hpp"
#include "actors/environment/environment.hpp"
#include "actors/policy_worker/policy_worker.hpp"
#include "actors/refit_coordinator/refit_coordinator.hpp"
#include "actors/rollout_worker/rollout_worker.hpp"
#include "actors/runtime/system_config.hpp"
#include "gpu/comm/local_group.h"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "gpu/engine/parity_task.h"

namespace tandem::test {

/// tandem's process configuration (one scheduler thread) with the tandem type-ID block.
struct actor_test_config : tandem::system_config {
  actor_test_config() : tandem::system_config(1) { add_tandem_types(*this); }
};

/// Refit bucket size of the tests: the 256-byte fake model cuts into 96 + 96 + 64 bytes.
constexpr std::int64_t test_bucket_bytes = 96;

inline gpu::fake_model_options tiny_model() {
  gpu::fake_model_options o;
  o.weight_bytes = 256;
  o.tensors = 4;
  o.seed = 7;
  o.vocab = 64;
  o.max_sequence_length = 64;
  return o;
}

inline gpu::fake_generate_options tiny_generator() {
  gpu::fake_generate_options o;
  o.model = tiny_model();
  o.max_num_sequences = 4;
  o.bucket_bytes = test_bucket_bytes;
  return o;
}

/// The logprobs job of step `step` at `version`: one sequence of 4 tokens, a 1-token prompt and 3
/// generated tokens the generator scored -4.2 each.
inline logprobs_job one_sequence_logprobs(weight_version version, std::uint32_t step = 0) {
  logprobs_job job;
  job.step = step;
  job.version = version;
  job.sequences.tokens = {1, 2, 3, 4};
  job.sequences.offsets = {0, 4};
  job.prompt_tokens = {1};
  job.lp_gen = {-4.2f, -4.2f, -4.2f};
  job.generated_with = {version};
  return job;
}

/// The train job that follows one_sequence_logprobs: advantage 1, one optimizer step over its 3
/// generated tokens. Enough to change the fake trainer's weights.
inline train_job one_sequence_train(weight_version version, std::uint32_t step = 0) {
  train_job job;
  job.step = step;
  job.version = version;
  job.advantages = {1.0};
  job.loss_multipliers = {1.0};
  job.optimizer_steps = {optimizer_share{1, {3, 1}}};
  job.micro_batch_tokens = 64;
  return job;
}

/// Stands in front of rollout worker `worker` as a relay does (a remote proxy, a bridge): every
/// request passes through; `on_job` sees each generate job before it goes and `edit` may change
/// each generate result before it returns (either may be empty). Quits with the worker.
inline rollout_actor::behavior_type relaying_rollout(rollout_actor::pointer self, rollout_actor worker,
                                                     std::function<void(const generate_job&)> on_job,
                                                     std::function<void(generate_result&)> edit) {
  self->link_to(worker);
  return {
      [=](generate_atom, generate_job& job) -> caf::result<generate_result> {
        if (on_job) on_job(job);
        auto rp = self->make_response_promise<generate_result>();
        self->request(worker, caf::infinite, generate_atom_v, std::move(job))
            .then(
                [rp, edit](generate_result& r) mutable {
                  if (edit) edit(r);
                  rp.deliver(std::move(r));
                },
                [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [=](check_atom a, manifest_check& m) { return self->delegate(worker, a, std::move(m)); },
      [=](stream_atom a, stream_job& job) { return self->delegate(worker, a, std::move(job)); },
      [=](commit_atom a, weight_version v) { return self->delegate(worker, a, v); },
      [=](abort_atom a, weight_version v) { return self->delegate(worker, a, v); },
      [=](bump_atom a, weight_version v) { return self->delegate(worker, a, v); },
      [=](version_atom a) { return self->delegate(worker, a); },
  };
}

/// The text of a tandem error (empty for none).
inline std::string text_of(const caf::error& e) { return error_text(e); }

/// A request's answer, or the error it ended with.
template <class T>
struct answer {
  std::optional<T> value;
  caf::error error;
};

/// `whom`'s answer to a request from `self`, or its error, within `timeout`.
template <class T, class Handle, class Duration, class... Ts>
answer<T> ask_within(caf::scoped_actor& self, Duration timeout, const Handle& whom, Ts&&... xs) {
  answer<T> out;
  self->request(whom, timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { out.value = std::move(x); }, [&](caf::error& e) { out.error = std::move(e); });
  return out;
}

/// A step's report, or the error it ended with.
struct step_outcome {
  std::optional<step_report> report;
  caf::error error;
};

/// What a cluster looks like.
struct cluster_options {
  refit_mode mode = refit_mode::dedicated;
  std::size_t rollout_workers = 2;  ///< colocated: 1 (the one sharing the trainer's device)
  std::size_t prompts_per_step = 2;
  std::size_t samples_per_prompt = 2;
  std::int32_t max_new_tokens = 3;
  std::size_t environment_workers = 0;  ///< 0: one environment_worker as the environment; else a pool of that many
  bool checksums = false;               ///< refits compare every bucket's checksum
  /// Data-parallel policy ranks "policy-0", "policy-1", ... whose optimizer steps all-reduce over an
  /// in-process group; more than one need threaded_cluster_fixture (an all-reduce waits for every rank).
  std::size_t policy_ranks = 1;
};

/// Where a test injects a fault; an empty hook leaves that part of the cluster as it is.
struct cluster_hooks {
  /// The train options of policy rank `rank`'s engine (default: train_engine_options{}).
  std::function<gpu::train_engine_options(std::size_t rank)> train_options;
  /// The engine rollout worker `worker` drives instead of its fake engine (which stays in
  /// cluster::generators).
  std::function<std::shared_ptr<gpu::generate_engine>(std::size_t worker, std::shared_ptr<gpu::fake_generate_engine>)>
      rollout_engine;
  /// The handle the driver gets for policy rank `rank` or rollout worker `worker` instead of the
  /// worker itself (the refit coordinator keeps the worker). An actor spawned here must quit with
  /// the worker it stands in front of (link to it).
  std::function<policy_actor(caf::actor_system&, std::size_t rank, policy_actor)> policy_for_driver;
  std::function<rollout_actor(caf::actor_system&, std::size_t worker, rollout_actor)> rollout_for_driver;
  /// The environment's scoring instead of the parity reward.
  std::function<scoring_function()> scoring;
  /// Changes the driver's configuration before it is spawned.
  std::function<void(driver_config&)> driver;
};

/// The prompts the test drivers cycle through.
inline std::vector<std::vector<std::int32_t>> test_prompts() { return {{5, 6, 7}, {9, 10}, {11, 12, 13, 14}}; }

/// The environment's scoring in these tests: the parity task's reward, single-turn.
inline scoring_function parity_scoring() { return single_turn(gpu::parity_reward); }

/// Policy rank 0 (and further data-parallel ranks), rollout workers "rollout-0", "rollout-1", ...,
/// the refit coordinator, the environment (the parity task) and the driver, with fake engines.
struct cluster {
  cluster_options options;
  cluster_hooks hooks;
  std::shared_ptr<gpu::fake_train_engine> trainer;  ///< rank 0's
  std::vector<std::shared_ptr<gpu::fake_train_engine>> trainers;  ///< by rank
  std::vector<std::shared_ptr<gpu::fake_generate_engine>> generators;
  policy_actor policy;            ///< rank 0
  std::vector<policy_actor> policies;  ///< by rank
  std::vector<rollout_actor> rollout;
  refit_coordinator_actor coordinator;
  environment_actor environment;
  driver_actor driver;

  /// Spawns every actor in `sys`; engine calls run where `execution` says.
  void spawn(caf::actor_system& sys, const cluster_options& o, engine_execution execution) {
    options = o;
    std::vector<std::unique_ptr<gpu::communicator>> group;  // the refit group: policy rank 0, then the rollout workers
    if (o.mode == refit_mode::dedicated) group = gpu::make_local_group(1 + static_cast<int>(o.rollout_workers));
    std::vector<std::unique_ptr<gpu::communicator>> data_parallel;
    if (o.policy_ranks > 1) data_parallel = gpu::make_local_group(static_cast<int>(o.policy_ranks));
    for (std::size_t r = 0; r < o.policy_ranks; ++r) {
      const auto train = hooks.train_options ? hooks.train_options(r) : gpu::train_engine_options{};
      std::shared_ptr<gpu::communicator> dp;
      if (!data_parallel.empty()) dp = std::move(data_parallel[r]);
      // the engine keeps its data-parallel group alive (as actors/runtime/engine_factory.cpp does)
      trainers.emplace_back(new gpu::fake_train_engine(tiny_model(), train, dp.get()),
                            [dp](gpu::fake_train_engine* e) { delete e; });
      policy_worker_config pc;
      pc.name = "policy-" + std::to_string(r);
      pc.engine = trainers.back();
      pc.execution = execution;
      if (r == 0 && !group.empty()) pc.refit_group = std::move(group[0]);
      policies.push_back(spawn_policy_worker(sys, pc));
    }
    trainer = trainers[0];
    policy = policies[0];
    for (std::size_t i = 0; i < o.rollout_workers; ++i) {
      auto g = std::make_shared<gpu::fake_generate_engine>(tiny_generator());
      if (o.mode == refit_mode::colocated) CAF_REQUIRE(g->share_weights(trainer->shared_weights()).is_ok());
      generators.push_back(g);
      rollout_worker_config rc;
      rc.name = "rollout-" + std::to_string(i);
      rc.engine = hooks.rollout_engine ? hooks.rollout_engine(i, g) : g;
      rc.manifest = gpu::fake_manifest(tiny_model());
      rc.execution = execution;
      if (!group.empty()) rc.refit_group = std::move(group[i + 1]);
      rc.refit_root = 0;
      rollout.push_back(spawn_rollout_worker(sys, rc));
    }
    refit_coordinator_config cc;
    cc.mode = o.mode;
    cc.policy = policy;
    cc.rollout = rollout;
    cc.bucket_bytes = test_bucket_bytes;
    cc.checksums = o.checksums;
    cc.timeout = std::chrono::seconds(30);
    coordinator = spawn_refit_coordinator(sys, cc);
    if (o.environment_workers == 0) {
      environment = sys.spawn(environment_worker, hooks.scoring ? hooks.scoring() : parity_scoring());
    } else {
      environment_config ec;
      ec.workers = o.environment_workers;
      ec.score = hooks.scoring ? hooks.scoring() : parity_scoring();
      ec.execution = execution;
      environment = spawn_environment(sys, ec);
    }
    driver_config dc;
    for (std::size_t r = 0; r < policies.size(); ++r)
      dc.policy.push_back(hooks.policy_for_driver ? hooks.policy_for_driver(sys, r, policies[r]) : policies[r]);
    for (std::size_t i = 0; i < rollout.size(); ++i)
      dc.rollout.push_back(hooks.rollout_for_driver ? hooks.rollout_for_driver(sys, i, rollout[i]) : rollout[i]);
    dc.refit = coordinator;
    dc.environment = environment;
    dc.prompts = test_prompts();
    dc.prompts_per_step = o.prompts_per_step;
    dc.samples_per_prompt = o.samples_per_prompt;
    dc.max_new_tokens = o.max_new_tokens;
    dc.micro_batch_tokens = 2 * 7;  // two of the longest sequences: a 4-token prompt and 3 new tokens
    dc.seed = 11;
    dc.timeout = std::chrono::seconds(60);
    if (hooks.driver) hooks.driver(dc);
    driver = spawn_driver(sys, dc);
  }

  /// Asks every actor to exit.
  void shut_down() {
    for (auto& r : rollout) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    for (auto& p : policies) caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    if (coordinator) caf::anon_send_exit(coordinator, caf::exit_reason::user_shutdown);
    if (environment) caf::anon_send_exit(environment, caf::exit_reason::user_shutdown);
    if (driver) caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
  }

  /// The request the driver builds for prompt k, sample s of `step` (driver.cpp, generating()).
  gpu::generation_request driver_request(std::uint32_t step, std::size_t k, std::size_t s) const {
    const auto ps = test_prompts();
    gpu::generation_request r;
    r.id = k * options.samples_per_prompt + s;
    r.prompt = ps[(step * options.prompts_per_step + k) % ps.size()];
    r.rng = gpu::rng_coordinates{11, step, 0, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(s), 0};
    r.max_new_tokens = options.max_new_tokens;
    return r;
  }

  /// True when every trajectory of `report` holds the tokens the weights hashing to
  /// `weight_hash` produce for its request.
  bool generated_by(const step_report& report, std::uint64_t weight_hash) const {
    for (const auto& t : report.trajectories) {
      const auto r = driver_request(report.step, t.prompt_index, t.sample_index);
      if (t.tokens != gpu::fake_generate_engine::expected_tokens(weight_hash, r, tiny_model().vocab)) return false;
    }
    return !report.trajectories.empty();
  }
};

/// A cluster on CAF's test coordinator with engine calls inline: every message is delivered by
/// the test (expect, sched.run()).
struct cluster_fixture : test_coordinator_fixture<actor_test_config>, cluster {
  void start(const cluster_options& o) {
    spawn(sys, o, engine_execution::inline_calls);
    sched.run();
  }

  ~cluster_fixture() override { shut_down(); }

  /// Sends a request, runs every actor until nothing is left to do, and returns the answer.
  template <class T, class Handle, class... Ts>
  answer<T> ask(const Handle& whom, Ts&&... xs) {
    answer<T> out;
    auto h = self->request(whom, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    h.receive([&](T& x) { out.value = std::move(x); }, [&](caf::error& e) { out.error = std::move(e); });
    return out;
  }

  /// The version a policy or rollout worker reports (fails the test on an error).
  template <class Handle>
  weight_version version_of(const Handle& whom) {
    auto r = ask<weight_version>(whom, version_atom_v);
    CAF_REQUIRE(r.value.has_value());
    return *r.value;
  }

  /// Runs the handshake to completion and returns its report (fails the test on an error).
  handshake_report handshake() {
    handshake_report out;
    auto h = self->request(coordinator, caf::infinite, handshake_atom_v);
    sched.run();
    h.receive([&](handshake_report& r) { out = std::move(r); },
              [&](caf::error& e) { CAF_FAIL("handshake failed: " << text_of(e)); });
    return out;
  }

  /// Runs one driver step to completion: the report, or the error.
  step_outcome run_step() {
    step_outcome out;
    auto h = self->request(driver, caf::infinite, step_atom_v);
    sched.run();
    h.receive([&](step_report& r) { out.report = std::move(r); }, [&](caf::error& e) { out.error = std::move(e); });
    return out;
  }

  /// The live version every rollout worker reports.
  std::vector<weight_version> rollout_versions() {
    std::vector<weight_version> out;
    for (auto& r : rollout) {
      auto h = self->request(r, caf::infinite, version_atom_v);
      sched.run();
      h.receive([&](weight_version v) { out.push_back(v); },
                [&](caf::error& e) { CAF_FAIL("version query failed: " << text_of(e)); });
    }
    return out;
  }
};

/// A cluster on a real actor system with engine calls on their own threads (the production mode):
/// dedicated refits stream over the local refit group. Every wait has a generous deadline.
struct threaded_cluster_fixture : cluster {
  static constexpr std::chrono::seconds deadline{60};

  actor_test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  void start(const cluster_options& o) { spawn(sys, o, engine_execution::off_scheduler); }

  ~threaded_cluster_fixture() { shut_down(); }

  /// A request's answer or its error, within the deadline.
  template <class T, class Handle, class... Ts>
  answer<T> ask(const Handle& whom, Ts&&... xs) {
    return ask_within<T>(self, deadline, whom, std::forward<Ts>(xs)...);
  }

  handshake_report handshake() {
    auto r = ask<handshake_report>(coordinator, handshake_atom_v);
    if (!r.value) CAF_FAIL("handshake failed: " << text_of(r.error));
    return *r.value;
  }

  step_outcome run_step() {
    auto r = ask<step_report>(driver, step_atom_v);
    return step_outcome{std::move(r.value), std::move(r.error)};
  }

  std::vector<weight_version> rollout_versions() {
    std::vector<weight_version> out;
    for (auto& r : rollout) {
      auto v = ask<weight_version>(r, version_atom_v);
      if (!v.value) CAF_FAIL("version query failed: " << text_of(v.error));
      out.push_back(*v.value);
    }
    return out;
  }

  /// The rollout engines' weight hashes (read between engine calls: no call is in flight).
  std::vector<std::uint64_t> rollout_hashes() const {
    std::vector<std::uint64_t> out;
    for (auto& g : generators) out.push_back(g->weight_hash());
    return out;
  }
};

/// Checks that `text` holds `part`; a failure prints both.
inline void check_contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) {
    CAF_CHECK(true);
  } else {
    CAF_CHECK_EQUAL(text, "a text holding: " + part);
  }
}

}  // namespace tandem::test
