// The driver's state machine (drawn in driver.hpp): one function per state, each entering its
// state's behaviour and sending the state's requests; replies lead to the next state.
#include "actors/driver/driver.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/driver/batch.hpp"
#include "actors/driver/fan_out.hpp"
#include "actors/driver/step_rewards.hpp"
#include "orchestration/data/prompt_order.h"
#include "orchestration/rl/dynamic_sampling.h"
#include "orchestration/rl/optimizer_steps.h"

namespace tandem {
namespace {

std::string v(weight_version x) { return "v" + std::to_string(x); }

using behavior = driver_actor::behavior_type;

/// The step in progress.
struct step_state {
  std::uint64_t serial = 0;  // replies of an older (failed) step are ignored
  caf::typed_response_promise<step_report> promise;
  step_report report;
  std::vector<double> advantages;
  std::vector<double> loss_multipliers;  // per trajectory: 0 leaves it out of the loss
  std::chrono::steady_clock::time_point mark;  // when the current phase began
  std::vector<rl::global_batch> plan;           // the optimizer steps and each rank's shard of them
  std::vector<std::vector<std::size_t>> shares;  // per rank: its trajectories (rank_trajectories)
  std::vector<std::int32_t> excluded;  // per trajectory: generated tokens the trainer's masks exclude
  std::uint32_t round = 0;             // the generation round in flight (dynamic sampling adds rounds)
  std::vector<std::size_t> records;    // the round's prompts: index in the prompt set, by prompt_index
  std::vector<trajectory> pool;        // dynamic sampling: every round's trajectories, by request id
  std::vector<double> pool_raw;        // and their raw rewards
  double generated_reward_sum = 0;     // of the pool's total rewards
  std::optional<rl::dynamic_sampling_cache> cache;
};

struct driver_state {
  static inline const char* name = "driver";

  driver_actor::stateful_pointer<driver_state> self = nullptr;
  driver_config config;
  weight_version live = 0;
  std::uint32_t next_step = 0;
  std::uint64_t next_prompt = 0;  // prompts drawn so far: each generation round takes the next ones
  std::optional<data::prompt_order> order;      // of the prompts (config.shuffle)
  std::uint64_t next_example = 0;               // warm-up examples drawn so far
  std::optional<data::prompt_order> sft_order;  // of the warm-up examples
  std::uint64_t next_serial = 1;
  step_state step;
  /// One-step off-policy (max_trajectory_age_steps 1): the next step's batch, generated while
  /// this step trains.
  struct next_batch {
    std::uint64_t serial = 0;  // its own: replies of a dropped batch are ignored
    std::uint32_t for_step = 0;
    weight_version version = 0;  // the live version it was generated with
    std::vector<std::size_t> records;  // its prompts' indices in the prompt set
    bool done = false;
    std::vector<trajectory> trajectories;
    double seconds = 0;
    std::chrono::steady_clock::time_point started;
  };
  std::optional<next_batch> ahead;
  bool refit_waits = false;     // training ended before the batch ahead: the refit starts when it arrives
  std::uint64_t next_event = 0;  // numbers the trace's events in the order they happen

  /// Appends an event of step `n` to the trace of the step in flight.
  void event(std::uint32_t n, const char* what) { step.report.events.push_back({next_event++, n, what}); }
  std::vector<std::string> lost;  // "<name>: <reason>" of every worker declared lost

  // ---- idle -------------------------------------------------------------------------------------

  behavior idle() {
    return {
        [this](step_atom) -> caf::result<step_report> { return start_step(); },
        [this](sft_step_atom) -> caf::result<step_report> { return start_sft_step(); },
        [this](snapshot_atom) -> caf::result<driver_snapshot> { return snapshot(); },
        [this](member_lost_atom, const std::string& worker, const std::string& reason) { on_lost(worker, reason); },
    };
  }

  driver_snapshot snapshot() const {
    driver_snapshot out{live, next_step, next_prompt, next_example, next_event, std::nullopt};
    if (ahead && ahead->done)
      out.ahead = driver_snapshot::batch_ahead{ahead->for_step, ahead->version, ahead->records, ahead->trajectories, ahead->seconds};
    return out;
  }

  /// Takes up where `from` (a checkpoint's snapshot) stood.
  void resume(const driver_snapshot& from) {
    live = from.live;
    next_step = from.next_step;
    next_prompt = from.next_prompt;
    next_example = from.next_example;
    next_event = from.next_event;
    if (!from.ahead) return;
    ahead.emplace();
    ahead->serial = next_serial++;
    ahead->for_step = from.ahead->for_step;
    ahead->version = from.ahead->version;
    ahead->records = from.ahead->records;
    ahead->trajectories = from.ahead->trajectories;
    ahead->seconds = from.ahead->seconds;
    ahead->done = true;
  }

  /// Marks trajectory `t` (of a round whose prompts are `records`) with its prompt's index in the
  /// prompt set and reference answer.
  void label(trajectory& t, const std::vector<std::size_t>& records) const {
    if (t.prompt_index >= records.size()) return;  // assemble_trajectories matched it to a request of the round
    t.record = records[t.prompt_index];
    if (!config.answers.empty()) t.answer = config.answers[t.record];
  }

  /// A warm-up step: the next sft_batch examples as the step's trajectories (targets as generated
  /// tokens), straight to the logprob pass, the cross-entropy train step and the refit.
  caf::result<step_report> start_sft_step() {
    if (!lost.empty()) return tandem_error(tandem_errc::peer_lost, "driver: step refused: " + lost.front() + " was lost");
    if (auto e = check_config()) return *e;
    if (config.sft_examples.empty() || config.sft_batch == 0)
      return tandem_error(tandem_errc::invalid_config, "driver: warm-up step refused: the driver has no warm-up examples");
    if (ahead) return tandem_error(tandem_errc::wrong_state, "driver: warm-up step refused: a batch was generated ahead for RL");
    if (!sft_order) sft_order.emplace(config.sft_examples.size(), config.shuffle, config.seed ^ 0x7366745F6F726465ull);
    step = step_state{};
    step.serial = next_serial++;
    step.promise = self->make_response_promise<step_report>();
    step.report.step = next_step;
    step.report.supervised = true;
    step.report.generated_with = live;
    step.mark = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < config.sft_batch; ++i) {
      const std::size_t k = sft_order->at(next_example++);
      const auto& x = config.sft_examples[k];
      trajectory t;
      t.id = i;
      t.tokens = x.target;
      t.logprobs.assign(x.target.size(), 0.0f);
      t.reason = gpu::finish_reason::stop_token;
      t.weight_version = live;
      t.prompt_index = static_cast<std::uint32_t>(i);
      t.prompt = x.prompt;
      t.record = k;
      step.report.trajectories.push_back(std::move(t));
    }
    step.advantages.assign(config.sft_batch, 0.0);
    step.loss_multipliers.assign(config.sft_batch, 1.0);
    self->become(busy("computing logprobs"));
    computing_logprobs();
    return step.promise;
  }

  caf::result<step_report> start_step() {
    if (!lost.empty()) return tandem_error(tandem_errc::peer_lost, "driver: step refused: " + lost.front() + " was lost");
    if (auto e = check_config()) return *e;
    step = step_state{};
    step.serial = next_serial++;
    step.promise = self->make_response_promise<step_report>();
    step.report.step = next_step;
    step.report.generated_with = live;
    step.mark = std::chrono::steady_clock::now();
    if (ahead && ahead->done && ahead->for_step == next_step) {
      next_batch batch = std::move(*ahead);
      ahead.reset();
      if (live - batch.version > static_cast<weight_version>(config.max_trajectory_age_steps)) {
        fail(tandem_error(tandem_errc::stale_version, "driver: step " + std::to_string(next_step) + ": its batch of " +
                                                          v(batch.version) + " is more than " +
                                                          std::to_string(config.max_trajectory_age_steps) +
                                                          " versions behind " + v(live)));
        return step.promise;
      }
      step.report.generated_with = batch.version;
      step.report.phase_seconds.generation = batch.seconds;
      event(next_step, "batch taken (generated during the previous step)");
      generating_ahead();
      self->become(busy("scoring"));
      scoring(std::move(batch.trajectories));
      return step.promise;
    }
    ahead.reset();
    generating();
    return step.promise;
  }

  std::optional<caf::error> check_config() const {
    std::string bad;
    if (config.policy.empty()) bad = "no policy workers";
    else if (config.rollout.empty()) bad = "no rollout workers";
    else if (config.prompts.empty()) bad = "no prompts";
    else if (config.prompts_per_step == 0) bad = "prompts_per_step must be >= 1";
    else if (config.samples_per_prompt == 0) bad = "samples_per_prompt must be >= 1";
    else if (config.max_new_tokens <= 0) bad = "max_new_tokens must be > 0";
    else if (config.max_trajectory_age_steps > 1) bad = "max_trajectory_age_steps must be 0 or 1";
    else if (config.max_trajectory_age_steps > 0 && config.dynamic_sampling)
      bad = "one-step off-policy generation with dynamic sampling is not built yet";
    if (bad.empty()) return std::nullopt;
    return tandem_error(tandem_errc::invalid_config, "driver: " + bad);
  }

  /// A behaviour of the busy states: `state` names the one a refused step request found.
  behavior busy(const char* state) {
    return {
        [this, state](step_atom) -> caf::result<step_report> {
          return tandem_error(tandem_errc::wrong_state, "driver: step refused: step " +
                                                            std::to_string(step.report.step) + " is " + state);
        },
        [this, state](sft_step_atom) -> caf::result<step_report> {
          return tandem_error(tandem_errc::wrong_state, "driver: warm-up step refused: step " +
                                                            std::to_string(step.report.step) + " is " + state);
        },
        [this, state](snapshot_atom) -> caf::result<driver_snapshot> {
          return tandem_error(tandem_errc::wrong_state, "driver: snapshot refused: step " +
                                                            std::to_string(step.report.step) + " is " + state);
        },
        [this](member_lost_atom, const std::string& worker, const std::string& reason) { on_lost(worker, reason); },
    };
  }

  void on_lost(const std::string& worker, const std::string& reason) {
    lost.push_back(worker + " (" + reason + ")");
    if (step.serial != 0) fail(tandem_error(tandem_errc::peer_lost, "driver: step " + std::to_string(step.report.step) +
                                                                            " failed: " + worker + " was lost: " + reason));
  }

  /// Ends the step with `e`; replies still on their way are ignored.
  void fail(caf::error e) {
    step.serial = 0;
    ahead.reset();  // its replies are ignored; the next step generates its own batch
    refit_waits = false;
    self->become(idle());
    step.promise.deliver(std::move(e));
  }

  /// An error handler failing the step with `where`.
  auto failing(std::string where) {
    return [this, serial = step.serial, where = std::move(where)](caf::error& e) {
      if (serial == step.serial) fail(relay_error(e, "driver: step " + std::to_string(step.report.step) + ": " + where));
    };
  }

  /// Whether the step that asks now is still the one in progress when its answers come.
  auto this_step() const {
    return [this, serial = step.serial] { return serial == step.serial; };
  }

  /// A fan-out's failed(): fails the step naming what failed on which target ("logprobs on policy rank 2").
  auto failing_on(std::string what, std::vector<std::size_t> targets) {
    return [this, what = std::move(what), targets = std::move(targets)](std::size_t i, caf::error& e) {
      fail(relay_error(e, "driver: step " + std::to_string(step.report.step) + ": " + what + " " +
                              std::to_string(targets[i])));
    };
  }

  /// 0, 1, ..., n - 1.
  static std::vector<std::size_t> every(std::size_t n) {
    std::vector<std::size_t> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }

  /// Seconds since the current phase began; the next phase begins now.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - step.mark).count();
    step.mark = now;
    return seconds;
  }

  // ---- generating -------------------------------------------------------------------------------

  /// Prompts of one generation round: prompts_per_round with dynamic sampling, else prompts_per_step.
  std::size_t round_prompts() const {
    return config.dynamic_sampling && config.prompts_per_round > 0 ? config.prompts_per_round : config.prompts_per_step;
  }

  /// Generation round step.round: prompt k of the round (the next from the prompt cursor) goes to
  /// rollout worker k % R as samples_per_prompt requests; request ids are unique within the step.
  /// The generate jobs of round `round` of step `n` (one per rollout worker, some may be empty):
  /// the next prompts of the prompt set, request ids from `first_id`.
  /// `records` gets each prompt's index in the prompt set, by its place in the round.
  std::vector<generate_job> round_jobs(std::uint32_t n, std::uint32_t round, std::size_t first_id,
                                       std::vector<std::size_t>& records) {
    const std::size_t workers = config.rollout.size(), prompts = round_prompts();
    std::vector<generate_job> jobs(workers);
    for (auto& j : jobs) j.version = live;
    if (!order) order.emplace(config.prompts.size(), config.shuffle, config.seed);
    records.clear();
    for (std::size_t k = 0; k < prompts; ++k) {
      records.push_back(order->at(next_prompt + k));
      const auto& prompt = config.prompts[records.back()];
      for (std::size_t s = 0; s < config.samples_per_prompt; ++s) {
        gpu::generation_request r;
        r.id = first_id + k * config.samples_per_prompt + s;
        r.prompt = prompt;
        r.sampling = config.sampling;
        r.rng = gpu::rng_coordinates{config.seed, n, round, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(s), 0};
        r.max_new_tokens = config.max_new_tokens;
        r.stop_tokens = config.stop_tokens;
        jobs[k % workers].requests.push_back(std::move(r));
      }
    }
    next_prompt += prompts;
    return jobs;
  }

  /// The rollout workers `jobs` has work for, and their jobs (taken from `jobs`).
  struct worker_jobs {
    std::vector<std::size_t> index;
    std::vector<rollout_actor> actors;
    std::vector<generate_job> jobs;
  };
  worker_jobs busy_workers(std::vector<generate_job>& jobs) const {
    worker_jobs out;
    for (std::size_t w = 0; w < jobs.size(); ++w) {
      if (jobs[w].requests.empty()) continue;
      out.index.push_back(w);
      out.actors.push_back(config.rollout[w]);
      out.jobs.push_back(std::move(jobs[w]));
    }
    return out;
  }

  void generating() {
    self->become(busy("generating"));
    const std::size_t prompts = round_prompts();
    if (config.max_prompts > 0 && next_prompt + prompts > config.max_prompts)
      return fail(tandem_error(tandem_errc::invalid_config,
                               "driver: step " + std::to_string(step.report.step) + ": the training prompts are used up: " +
                                   std::to_string(next_prompt) + " of the " + std::to_string(config.max_prompts) +
                                   " draws grpo.max_num_epochs allows are taken, and the round needs " +
                                   std::to_string(prompts) + " more (raise grpo.max_num_epochs)"));
    event(step.report.step, "generation started");
    auto jobs = round_jobs(step.report.step, step.round, step.pool.size(), step.records);
    worker_jobs used = busy_workers(jobs);
    const std::size_t total = prompts * config.samples_per_prompt;
    auto done = std::make_shared<std::size_t>(0);
    if (config.on_generation_progress) config.on_generation_progress(0, total);
    fan_out<generate_result>(
        self, used.actors, std::move(used.jobs), config.timeout, generate_atom_v, this_step(),
        [this, total, done](std::size_t, const generate_result& r) {
          *done += r.trajectories.size();
          if (config.on_generation_progress) config.on_generation_progress(std::min(*done, total), total);
        },
        [this](std::vector<generate_result>& results) { generated(results); },
        failing_on("generate on rollout worker", used.index));
  }

  void generated(std::vector<generate_result>& results) {
    std::vector<trajectory> round;
    for (auto& r : results) {
      for (auto& t : r.trajectories) {
        if (t.weight_version != live)
          return fail(tandem_error(tandem_errc::stale_version,
                                   "driver: step " + std::to_string(step.report.step) + ": " + t.worker +
                                       " returned trajectory " + std::to_string(t.id) + " of " + v(t.weight_version) +
                                       ", " + v(live) + " is live"));
        label(t, step.records);
        round.push_back(std::move(t));
      }
    }
    std::sort(round.begin(), round.end(), [](const trajectory& a, const trajectory& b) { return a.id < b.id; });
    step.report.phase_seconds.generation += lap();
    event(step.report.step, "generation finished");
    if (step.round == 0) generating_ahead();
    scoring(std::move(round));
  }

  // ---- generating ahead (max_trajectory_age_steps 1) ----------------------------------------------

  /// Generation of the next step's batch, with the live version, while this step scores, computes
  /// logprobs and trains; the refit waits for it (the rollout workers are busy until then).
  void generating_ahead() {
    if (config.max_trajectory_age_steps == 0) return;
    const std::uint32_t n = step.report.step + 1;
    if (config.last_step && n > *config.last_step) return;
    ahead.emplace();
    ahead->serial = next_serial++;
    ahead->for_step = n;
    ahead->version = live;
    ahead->started = std::chrono::steady_clock::now();
    event(n, "generation started");
    auto jobs = round_jobs(n, 0, 0, ahead->records);
    worker_jobs used = busy_workers(jobs);
    fan_out<generate_result>(
        self, used.actors, std::move(used.jobs), config.timeout, generate_atom_v,
        [this, serial = ahead->serial] { return ahead && serial == ahead->serial; }, no_progress{},
        [this](std::vector<generate_result>& results) { generated_ahead(results); },
        [this, index = used.index](std::size_t i, caf::error& e) {
          const std::uint32_t n = ahead->for_step;
          ahead.reset();
          if (step.serial != 0)
            fail(relay_error(e, "driver: step " + std::to_string(n) + ": generate (ahead, during step " +
                                    std::to_string(step.report.step) + ") on rollout worker " + std::to_string(index[i])));
        });
  }

  void generated_ahead(std::vector<generate_result>& results) {
    auto& a = *ahead;
    for (auto& r : results)
      for (auto& t : r.trajectories) {
        if (t.weight_version != a.version) {
          const std::string what = "driver: step " + std::to_string(a.for_step) + ": " + t.worker + " returned trajectory " +
                                   std::to_string(t.id) + " of " + v(t.weight_version) + ", it was asked for " + v(a.version);
          ahead.reset();
          if (step.serial != 0) fail(tandem_error(tandem_errc::stale_version, what));
          return;
        }
        label(t, a.records);
        a.trajectories.push_back(std::move(t));
      }
    std::sort(a.trajectories.begin(), a.trajectories.end(), [](const trajectory& x, const trajectory& y) { return x.id < y.id; });
    a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - a.started).count();
    a.done = true;
    if (step.serial != 0) event(a.for_step, "generation finished");
    if (refit_waits) {
      refit_waits = false;
      refitting();
    }
  }

  // ---- scoring ----------------------------------------------------------------------------------

  void scoring(std::vector<trajectory> round) {
    self->become(busy("scoring"));
    const std::size_t n = round.size();
    auto kept = std::make_shared<std::vector<trajectory>>(round);
    score_job job{step.report.step, std::move(round)};
    self->request(config.environment, config.timeout, score_atom_v, std::move(job))
        .then(
            [this, serial = step.serial, n, kept](score_result& r) {
                if (serial != step.serial) return;
                if (r.feedback.size() != n)
                  return fail(tandem_error(tandem_errc::engine_failure,
                                           "driver: the environment scored " + std::to_string(r.feedback.size()) +
                                               " of " + std::to_string(n) + " trajectories"));
                scored(std::move(*kept), r);
            },
              failing("scoring"));
  }

  void scored(std::vector<trajectory> round, const score_result& r) {
    auto& rep = step.report;
    std::vector<double> raw;
    for (const auto& f : r.feedback) {
      raw.push_back(f.reward);
      if (!f.done) rep.unfinished_episodes += 1;
    }
    if (!config.dynamic_sampling) {
      rep.trajectories = std::move(round);
      rep.raw_rewards = std::move(raw);
      return rewarded(static_cast<std::int64_t>(config.prompts_per_step), {});
    }
    // Dynamic sampling: the round's groups whose unshaped rewards differ join the cache.
    auto computed = compute_step_rewards(round, raw, static_cast<std::int64_t>(round_prompts()), config.rewards);
    if (!computed)
      return fail(tandem_error(tandem_errc::invalid_config, "driver: step " + std::to_string(rep.step) + ": rewards: " +
                                                                computed.error().message));
    std::vector<rl::round_sample> samples;
    for (std::size_t i = 0; i < round.size(); ++i) {
      samples.push_back({round[i].prompt_index, computed->unshaped[i], static_cast<std::int64_t>(step.pool.size())});
      step.generated_reward_sum += computed->total[i];
      step.pool.push_back(std::move(round[i]));
      step.pool_raw.push_back(raw[i]);
    }
    if (!step.cache) {
      auto c = rl::dynamic_sampling_cache::create(config.dynamic_sampling_settings);
      if (!c) return fail(tandem_error(tandem_errc::invalid_config, "driver: dynamic sampling: " + c.error().message));
      step.cache.emplace(std::move(c.value()));
    }
    if (auto e = step.cache->add_round(samples))
      return fail(tandem_error(tandem_errc::invalid_config,
                               "driver: step " + std::to_string(rep.step) + ": dynamic sampling: " + e->message +
                                   " (raise grpo.dynamic_sampling_max_gen_batches or grpo.batch_multiplier, or the task "
                                   "gives every sample of a prompt the same reward)"));
    rep.phase_seconds.scoring += lap();
    if (!step.cache->full()) {
      ++step.round;
      return generating();
    }
    auto batch = step.cache->take();
    if (!batch) return fail(tandem_error(tandem_errc::invalid_config, "driver: dynamic sampling: " + batch.error().message));
    std::vector<std::int64_t> groups;
    for (const auto& k : batch->samples) {
      rep.trajectories.push_back(step.pool[static_cast<std::size_t>(k.payload)]);
      rep.raw_rewards.push_back(step.pool_raw[static_cast<std::size_t>(k.payload)]);
      groups.push_back(k.group);
    }
    rep.dynamic_sampling = batch->metrics;
    rewarded(batch->group_count, groups);
  }

  /// The step's batch is in the report: its rewards, advantages and loss multipliers (over
  /// `group_count` groups, `groups` per trajectory, or each trajectory's prompt_index when empty).
  void rewarded(std::int64_t group_count, const std::vector<std::int64_t>& groups) {
    auto& rep = step.report;
    auto computed = groups.empty()
                        ? compute_step_rewards(rep.trajectories, rep.raw_rewards, group_count, config.rewards)
                        : compute_step_rewards(rep.trajectories, rep.raw_rewards, groups, group_count, config.rewards);
    if (!computed)
      return fail(tandem_error(tandem_errc::invalid_config, "driver: step " + std::to_string(rep.step) +
                                                                ": rewards: " + computed.error().message));
    rep.rewards = std::move(computed->total);
    rep.filtered_samples = computed->filtered;
    double sum = 0;
    for (const double x : rep.rewards) sum += x;
    rep.reward_mean = rep.rewards.empty() ? 0.0 : sum / static_cast<double>(rep.rewards.size());
    rep.generated_reward_mean = step.pool.empty() ? rep.reward_mean : step.generated_reward_sum / static_cast<double>(step.pool.size());
    rep.advantages = computed->advantages;
    step.advantages = std::move(computed->advantages);
    step.loss_multipliers = std::move(computed->loss_multipliers);
    rep.phase_seconds.scoring += lap();
    computing_logprobs();
  }

  // ---- computing_logprobs -----------------------------------------------------------------------

  void computing_logprobs() {
    self->become(busy("computing logprobs"));
    const auto& trajectories = step.report.trajectories;
    const std::size_t ranks = config.policy.size(), n = trajectories.size();
    // A warm-up step is one optimizer step over its examples (sft.batch_size).
    const auto global = config.train_global_batch_size > 0 && !step.report.supervised ? config.train_global_batch_size
                                                                                       : static_cast<std::int64_t>(n);
    auto plan = rl::split_optimizer_steps(static_cast<std::int64_t>(n), global, static_cast<std::int64_t>(ranks));
    if (!plan)
      return fail(tandem_error(tandem_errc::invalid_config, "driver: step " + std::to_string(step.report.step) +
                                                                ": optimizer steps: " + plan.error().message));
    step.plan = std::move(plan.value());
    step.excluded.assign(n, 0);
    step.shares.clear();
    for (std::size_t r = 0; r < ranks; ++r) step.shares.push_back(rank_trajectories(step.plan, r));
    std::vector<logprobs_job> jobs;
    for (std::size_t r = 0; r < ranks; ++r)
      jobs.push_back(make_logprobs_job(step.report.step, live, trajectories, step.shares[r],
                                       step.report.supervised ? gpu::ops::sampling_params{} : config.sampling,
                                       !step.report.supervised && config.loss.kl_beta > 0));
    fan_out<logprobs_result>(
        self, config.policy, std::move(jobs), config.timeout, logprobs_atom_v, this_step(), no_progress{},
        [this](std::vector<logprobs_result>& results) { computed_logprobs(results); },
        failing_on("logprobs on policy rank", every(ranks)));
  }

  void computed_logprobs(const std::vector<logprobs_result>& results) {
    auto& rep = step.report;
    for (std::size_t r = 0; r < results.size(); ++r) {
      const auto& x = results[r];
      if (x.version != live)
        return fail(tandem_error(tandem_errc::stale_version, "driver: step " + std::to_string(rep.step) + ": " + x.worker +
                                                                 " computed logprobs with " + v(x.version) +
                                                                 ", the trajectories came from " + v(live)));
      const auto& share = step.shares[r];
      if (x.excluded_tokens.size() != share.size())
        return fail(tandem_error(tandem_errc::engine_failure,
                                 "driver: step " + std::to_string(rep.step) + ": " + x.worker + " answered for " +
                                     std::to_string(x.excluded_tokens.size()) + " of its " + std::to_string(share.size()) +
                                     " sequences"));
      for (std::size_t k = 0; k < share.size(); ++k) {
        step.excluded[share[k]] = x.excluded_tokens[k];
        if (!step.loss_multipliers.empty() && step.loss_multipliers[share[k]] == 0.0) continue;
        rep.excluded_tokens += x.excluded_tokens[k];
      }
    }
    rep.phase_seconds.logprobs = lap();
    training();
  }

  // ---- training ---------------------------------------------------------------------------------

  void training() {
    self->become(busy("training"));
    event(step.report.step, "training started");
    const auto& trajectories = step.report.trajectories;
    const std::size_t ranks = config.policy.size();
    step.report.train_tokens =
        count_masked(trajectories, 0, trajectories.size(), step.loss_multipliers, step.excluded).tokens;
    step.report.optimizer_steps = step.plan.size();
    std::vector<train_job> jobs;
    for (std::size_t r = 0; r < ranks; ++r) {
      jobs.push_back(make_train_job(step.report.step, live, step.plan, r, trajectories, step.advantages,
                                    step.loss_multipliers, step.excluded, config.micro_batch_tokens));
      jobs.back().sampling = step.report.supervised ? gpu::ops::sampling_params{} : config.sampling;
      jobs.back().objective = step.report.supervised ? train_objective::cross_entropy : train_objective::policy_gradient;
    }
    fan_out<train_report>(
        self, config.policy, std::move(jobs), config.timeout, train_atom_v, this_step(), no_progress{},
        [this](std::vector<train_report>& results) { trained(results); },
        failing_on("train on policy rank", every(ranks)));
  }

  void trained(const std::vector<train_report>& results) {
    auto& rep = step.report;
    rep.trained_to = results[0].version;
    std::vector<std::string> names;  // by rank
    bool first = true;
    for (const auto& x : results) {
      if (x.version != live + 1)
        return fail(tandem_error(tandem_errc::stale_version, "driver: step " + std::to_string(rep.step) + ": " + x.worker +
                                                                 " trained to " + v(x.version) + ", expected " +
                                                                 v(live + 1)));
      rep.micro_batches += x.micro_batches;
      rep.weights_digests.push_back(x.weights_digest);
      rep.turns.merge(x.turns);
      rep.loss += x.loss;  // each rank's share of each optimizer step's loss
      if (names.empty()) {  // every rank steps with the same all-reduced norms
        rep.optimizer = x.optimizer;
        rep.grad_norm_mean = x.optimizer_steps > 0 ? x.grad_norm_sum / static_cast<double>(x.optimizer_steps) : 0.0;
      }
      names.push_back(x.worker);
      if (x.micro_batches == 0) continue;
      if (first) {
        rep.metrics = x.metrics;
        first = false;
      } else {
        rep.metrics.merge(x.metrics);
      }
    }
    if (!step.plan.empty()) rep.loss /= static_cast<double>(step.plan.size());  // the mean of the optimizer steps' losses
    if (auto e = diverged(rep, names)) return fail(*e);
    rep.phase_seconds.training = lap();
    event(rep.step, "training finished");
    if (ahead && !ahead->done) {  // the rollout workers are still generating the next step's batch
      refit_waits = true;
      self->become(busy("waiting for the next step's generation"));
      return;
    }
    refitting();
  }

  /// Data-parallel ranks apply the same all-reduced gradients, so their weights must be equal
  /// after every step; digests (where the engines offer them) catch a rank that drifted.
  std::optional<caf::error> diverged(const step_report& rep, const std::vector<std::string>& names) const {
    const auto& d = rep.weights_digests;
    if (d.empty() || d.front() == 0) return std::nullopt;
    if (std::all_of(d.begin(), d.end(), [&](std::uint64_t x) { return x == d.front(); })) return std::nullopt;
    // Name the ranks that left the majority's weights; with no majority, the first two that differ.
    std::map<std::uint64_t, std::size_t> votes;
    for (const auto x : d) ++votes[x];
    const auto most = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    std::string odd;
    std::size_t odd_count = 0;
    if (most->second * 2 > d.size()) {
      for (std::size_t i = 0; i < d.size(); ++i)
        if (d[i] != most->first) odd += (odd_count++ ? ", " : "") + names[i];
      return tandem_error(tandem_errc::engine_failure,
                          "driver: step " + std::to_string(rep.step) + ": the weights of " + odd + " differ from the other " +
                              std::to_string(most->second) +
                              " data-parallel ranks' after the optimizer step (data-parallel ranks diverged)");
    }
    std::size_t other = 1;
    while (d[other] == d.front()) ++other;
    return tandem_error(tandem_errc::engine_failure,
                        "driver: step " + std::to_string(rep.step) + ": the weights of " + names[other] + " differ from " +
                            names[0] + "'s after the optimizer step (data-parallel ranks diverged)");
  }

  // ---- refitting --------------------------------------------------------------------------------

  void refitting() {
    self->become(busy("refitting"));
    step.report.phase_seconds.waiting = lap();
    event(step.report.step, "refit started");
    self->request(config.refit, config.timeout, refit_atom_v, step.report.trained_to)
        .then(
            [this, serial = step.serial](refit_report& r) {
              if (serial == step.serial) refitted(std::move(r));
            },
            failing("refit"));
  }

  void refitted(refit_report r) {
    live = step.report.trained_to;
    step.report.refit = std::move(r);
    step.report.phase_seconds.refit = lap();
    event(step.report.step, "refit finished");
    next_step = step.report.step + 1;
    step.serial = 0;
    self->become(idle());
    step.promise.deliver(std::move(step.report));
  }
};

behavior driver(driver_actor::stateful_pointer<driver_state> self, driver_config config) {
  auto& st = self->state;
  st.self = self;
  st.live = config.initial_version;
  if (config.resume) st.resume(*config.resume);
  st.config = std::move(config);
  return st.idle();
}

}  // namespace

driver_actor spawn_driver(caf::actor_system& sys, driver_config config) {
  return sys.spawn(driver, std::move(config));
}

}  // namespace tandem
