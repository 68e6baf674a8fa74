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
#include "actors/driver/step_rewards.hpp"

namespace tandem {
namespace {

std::string v(weight_version x) { return "v" + std::to_string(x); }

using behavior = driver_actor::behavior_type;

/// Answers of one fan-out, by destination.
template <class T>
struct fan_in {
  explicit fan_in(std::size_t n) : results(n), left(n) {}
  std::vector<std::optional<T>> results;
  std::size_t left;
};

/// The step in progress.
struct step_state {
  std::uint64_t serial = 0;  // replies of an older (failed) step are ignored
  caf::typed_response_promise<step_report> promise;
  step_report report;
  std::vector<double> advantages;
  std::vector<double> loss_multipliers;  // per trajectory: 0 leaves it out of the loss
  std::chrono::steady_clock::time_point mark;  // when the current phase began
  std::vector<float> lp_prev;  // per token of every trajectory, packed in order
};

struct driver_state {
  static inline const char* name = "driver";

  driver_actor::stateful_pointer<driver_state> self = nullptr;
  driver_config config;
  weight_version live = 0;
  std::uint32_t next_step = 0;
  std::uint64_t next_serial = 1;
  step_state step;
  std::vector<std::string> lost;  // "<name>: <reason>" of every worker declared lost

  // ---- idle -------------------------------------------------------------------------------------

  behavior idle() {
    return {
        [this](step_atom) -> caf::result<step_report> { return start_step(); },
        [this](member_lost_atom, const std::string& worker, const std::string& reason) { on_lost(worker, reason); },
    };
  }

  caf::result<step_report> start_step() {
    if (!lost.empty()) return tandem_error(tandem_errc::peer_lost, "driver: step refused: " + lost.front() + " was lost");
    if (auto e = check_config()) return *e;
    step = step_state{};
    step.serial = next_serial++;
    step.promise = self->make_response_promise<step_report>();
    step.report.step = next_step;
    step.report.generated_with = live;
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
    self->become(idle());
    step.promise.deliver(std::move(e));
  }

  /// An error handler failing the step with `where`.
  auto failing(std::string where) {
    return [this, serial = step.serial, where = std::move(where)](caf::error& e) {
      if (serial == step.serial) fail(relay_error(e, "driver: step " + std::to_string(step.report.step) + ": " + where));
    };
  }

  /// Seconds since the current phase began; the next phase begins now.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - step.mark).count();
    step.mark = now;
    return seconds;
  }

  // ---- generating -------------------------------------------------------------------------------

  void generating() {
    self->become(busy("generating"));
    step.mark = std::chrono::steady_clock::now();
    const std::size_t workers = config.rollout.size();
    std::vector<generate_job> jobs(workers);
    for (auto& j : jobs) j.version = live;
    for (std::size_t k = 0; k < config.prompts_per_step; ++k) {
      const auto& prompt = config.prompts[(step.report.step * config.prompts_per_step + k) % config.prompts.size()];
      for (std::size_t s = 0; s < config.samples_per_prompt; ++s) {
        gpu::generation_request r;
        r.id = k * config.samples_per_prompt + s;
        r.prompt = prompt;
        r.sampling = config.sampling;
        r.rng = gpu::rng_coordinates{config.seed, step.report.step, 0, static_cast<std::uint32_t>(k),
                                     static_cast<std::uint32_t>(s), 0};
        r.max_new_tokens = config.max_new_tokens;
        r.stop_tokens = config.stop_tokens;
        jobs[k % workers].requests.push_back(std::move(r));
      }
    }
    std::vector<std::size_t> used;
    for (std::size_t w = 0; w < workers; ++w) {
      if (!jobs[w].requests.empty()) used.push_back(w);
    }
    auto g = std::make_shared<fan_in<generate_result>>(used.size());
    for (std::size_t u = 0; u < used.size(); ++u) {
      const std::size_t w = used[u];
      self->request(config.rollout[w], config.timeout, generate_atom_v, std::move(jobs[w]))
          .then(
              [this, serial = step.serial, g, u](generate_result& r) {
                if (serial != step.serial) return;
                g->results[u] = std::move(r);
                if (--g->left == 0) generated(*g);
              },
                failing("generate on rollout worker " + std::to_string(w)));
    }
  }

  void generated(fan_in<generate_result>& g) {
    auto& out = step.report.trajectories;
    for (auto& r : g.results) {
      for (auto& t : r->trajectories) {
        if (t.version != live)
          return fail(tandem_error(tandem_errc::stale_version,
                                   "driver: step " + std::to_string(step.report.step) + ": " + t.worker +
                                       " returned trajectory " + std::to_string(t.id) + " of " + v(t.version) +
                                       ", " + v(live) + " is live"));
        out.push_back(std::move(t));
      }
    }
    std::sort(out.begin(), out.end(), [](const trajectory& a, const trajectory& b) { return a.id < b.id; });
    step.report.phase_seconds.generation = lap();
    scoring();
  }

  // ---- scoring ----------------------------------------------------------------------------------

  void scoring() {
    self->become(busy("scoring"));
    score_job job{step.report.step, step.report.trajectories};
    const std::size_t n = job.trajectories.size();
    self->request(config.environment, config.timeout, score_atom_v, std::move(job))
        .then(
            [this, serial = step.serial, n](score_result& r) {
                if (serial != step.serial) return;
                if (r.feedback.size() != n)
                  return fail(tandem_error(tandem_errc::engine_failure,
                                           "driver: the environment scored " + std::to_string(r.feedback.size()) +
                                               " of " + std::to_string(n) + " trajectories"));
                scored(r);
            },
              failing("scoring"));
  }

  void scored(const score_result& r) {
    auto& rep = step.report;
    for (const auto& f : r.feedback) {
      rep.raw_rewards.push_back(f.reward);
      if (!f.done) rep.unfinished_episodes += 1;
    }
    auto computed = compute_step_rewards(rep.trajectories, rep.raw_rewards, static_cast<std::int64_t>(config.prompts_per_step),
                                         config.rewards);
    if (!computed)
      return fail(tandem_error(tandem_errc::invalid_config, "driver: step " + std::to_string(rep.step) +
                                                                ": rewards: " + computed.error().message));
    rep.rewards = std::move(computed->total);
    rep.filtered_samples = computed->filtered;
    double sum = 0;
    for (const double x : rep.rewards) sum += x;
    rep.reward_mean = rep.rewards.empty() ? 0.0 : sum / static_cast<double>(rep.rewards.size());
    rep.advantages = computed->advantages;
    step.advantages = std::move(computed->advantages);
    step.loss_multipliers = std::move(computed->loss_multipliers);
    rep.phase_seconds.scoring = lap();
    computing_logprobs();
  }

  // ---- computing_logprobs -----------------------------------------------------------------------

  void computing_logprobs() {
    self->become(busy("computing logprobs"));
    const auto& trajectories = step.report.trajectories;
    const std::size_t ranks = config.policy.size(), n = trajectories.size();
    auto g = std::make_shared<fan_in<logprobs_result>>(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
      logprobs_job job{pack_sequences(trajectories, shard_begin(n, ranks, r), shard_begin(n, ranks, r + 1)),
                       config.sampling};
      self->request(config.policy[r], config.timeout, logprobs_atom_v, std::move(job))
          .then(
              [this, serial = step.serial, g, r](logprobs_result& x) {
                if (serial != step.serial) return;
                g->results[r] = std::move(x);
                if (--g->left == 0) computed_logprobs(*g);
              },
                failing("logprobs on policy rank " + std::to_string(r)));
    }
  }

  void computed_logprobs(fan_in<logprobs_result>& g) {
    std::size_t tokens = 0;
    for (const auto& t : step.report.trajectories) tokens += t.prompt.size() + t.tokens.size();
    for (auto& x : g.results) {
      if (x->version != live)
        return fail(tandem_error(tandem_errc::stale_version, "driver: step " + std::to_string(step.report.step) + ": " +
                                                                 x->worker + " computed logprobs with " + v(x->version) +
                                                                 ", the trajectories came from " + v(live)));
      step.lp_prev.insert(step.lp_prev.end(), x->logprobs.begin(), x->logprobs.end());
    }
    if (step.lp_prev.size() != tokens)
      return fail(tandem_error(tandem_errc::engine_failure, "driver: the policy returned " + std::to_string(step.lp_prev.size()) +
                                                                " logprobs for " + std::to_string(tokens) + " tokens"));
    step.report.phase_seconds.logprobs = lap();
    training();
  }

  // ---- training ---------------------------------------------------------------------------------

  void training() {
    self->become(busy("training"));
    const auto& trajectories = step.report.trajectories;
    const std::size_t ranks = config.policy.size(), n = trajectories.size();
    const gpu::global_counts counts = count_masked(trajectories, step.loss_multipliers);
    step.report.train_tokens = counts.tokens;
    auto g = std::make_shared<fan_in<train_report>>(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
      train_job job;
      job.version = live;
      job.micro_batches = make_micro_batches(trajectories, step.advantages, step.lp_prev, shard_begin(n, ranks, r),
                                             shard_begin(n, ranks, r + 1), config.micro_batch_tokens, step.loss_multipliers);
      job.counts = counts;
      job.loss = config.loss;
      job.sampling = config.sampling;
      self->request(config.policy[r], config.timeout, train_atom_v, std::move(job))
          .then(
              [this, serial = step.serial, g, r](train_report& x) {
                if (serial != step.serial) return;
                g->results[r] = std::move(x);
                if (--g->left == 0) trained(*g);
              },
                failing("train on policy rank " + std::to_string(r)));
    }
  }

  void trained(fan_in<train_report>& g) {
    auto& rep = step.report;
    rep.trained_to = g.results[0]->version;
    std::vector<std::string> names;  // by rank
    bool first = true;
    for (auto& x : g.results) {
      if (x->version != live + 1)
        return fail(tandem_error(tandem_errc::stale_version, "driver: step " + std::to_string(rep.step) + ": " + x->worker +
                                                                 " trained to " + v(x->version) + ", expected " +
                                                                 v(live + 1)));
      rep.micro_batches += x->micro_batches;
      rep.weights_digests.push_back(x->weights_digest);
      if (names.empty()) rep.optimizer = x->optimizer;  // every rank steps with the same all-reduced norm
      names.push_back(x->worker);
      if (x->micro_batches == 0) continue;
      if (first) {
        rep.metrics = x->metrics;
        first = false;
      } else {
        rep.metrics.merge(x->metrics);
      }
    }
    if (auto e = diverged(rep, names)) return fail(*e);
    rep.phase_seconds.training = lap();
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
  st.next_step = config.first_step;
  st.config = std::move(config);
  return st.idle();
}

}  // namespace

driver_actor spawn_driver(caf::actor_system& sys, driver_config config) {
  return sys.spawn(driver, std::move(config));
}

}  // namespace tandem
