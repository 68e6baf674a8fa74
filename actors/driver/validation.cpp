// The validation actor's state machine (drawn in validation.hpp): one function per state, each
// entering its state's behaviour and sending the state's requests; replies lead to the next state.
#include "actors/driver/validation.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"
#include "actors/driver/fan_out.hpp"
#include "orchestration/rl/reward_metrics.h"

namespace tandem {
namespace {

std::string v(weight_version x) { return "v" + std::to_string(x); }

using behavior = validation_actor::behavior_type;

/// The pass in progress.
struct pass_state {
  std::uint64_t serial = 0;  // replies of an older (failed) pass are ignored
  caf::typed_response_promise<validation_report> promise;
  validation_report report;
  std::size_t next_prompt = 0;           // the first prompt of the current round
  std::vector<trajectory> round;         // the current round's responses, by prompt
  std::vector<double> rewards;           // per prompt so far
  std::vector<std::int64_t> lengths;     // per prompt so far
  std::chrono::steady_clock::time_point started;
};

struct validation_state {
  static inline const char* name = "validation";

  validation_actor::stateful_pointer<validation_state> self = nullptr;
  validation_config config;
  std::uint64_t next_serial = 1;
  pass_state pass;
  std::vector<std::string> lost;  // "<name> (<reason>)" of every member declared lost

  std::string where() const { return "validation after step " + std::to_string(pass.report.step); }

  // ---- idle -------------------------------------------------------------------------------------

  behavior idle() {
    return {
        [this](validate_atom, weight_version version, std::uint32_t step) -> caf::result<validation_report> {
          return start(version, step);
        },
        [this](member_lost_atom, const std::string& member, const std::string& reason) { on_lost(member, reason); },
    };
  }

  caf::result<validation_report> start(weight_version version, std::uint32_t step) {
    if (!lost.empty())
      return tandem_error(tandem_errc::peer_lost, "validation: pass refused: " + lost.front() + " was lost");
    if (auto e = check_config()) return *e;
    pass = pass_state{};
    pass.serial = next_serial++;
    pass.promise = self->make_response_promise<validation_report>();
    pass.report.step = step;
    pass.report.version = version;
    pass.report.prompts = config.prompts.size();
    pass.started = std::chrono::steady_clock::now();
    generating();
    return pass.promise;
  }

  std::optional<caf::error> check_config() const {
    std::string bad;
    if (config.rollout.empty()) bad = "no rollout workers";
    else if (config.prompts.empty()) bad = "no validation prompts";
    else if (config.batch_size == 0) bad = "batch_size must be >= 1";
    else if (config.max_new_tokens <= 0) bad = "max_new_tokens must be > 0";
    if (bad.empty()) return std::nullopt;
    return tandem_error(tandem_errc::invalid_config, "validation: " + bad);
  }

  /// A behaviour of the busy states: `state` names the one a refused request found.
  behavior busy(const char* state) {
    return {
        [this, state](validate_atom, weight_version, std::uint32_t) -> caf::result<validation_report> {
          return tandem_error(tandem_errc::wrong_state, "validation: pass refused: the " + where() + " is " + state);
        },
        [this](member_lost_atom, const std::string& member, const std::string& reason) { on_lost(member, reason); },
    };
  }

  void on_lost(const std::string& member, const std::string& reason) {
    lost.push_back(member + " (" + reason + ")");
    if (pass.serial != 0)
      fail(tandem_error(tandem_errc::peer_lost, where() + " failed: " + member + " was lost: " + reason));
  }

  /// Ends the pass with `e`; replies still on their way are ignored.
  void fail(caf::error e) {
    pass.serial = 0;
    self->become(idle());
    pass.promise.deliver(std::move(e));
  }

  /// An error handler failing the pass with `what`.
  auto failing(std::string what) {
    return [this, serial = pass.serial, what = std::move(what)](caf::error& e) {
      if (serial == pass.serial) fail(relay_error(e, where() + ": " + what));
    };
  }

  // ---- generating -------------------------------------------------------------------------------

  void generating() {
    self->become(busy("generating"));
    const std::size_t workers = config.rollout.size();
    const std::size_t begin = pass.next_prompt;
    const std::size_t end = std::min(begin + config.batch_size, config.prompts.size());
    pass.report.rounds += 1;
    std::vector<generate_job> jobs(workers);
    for (auto& j : jobs) j.version = pass.report.version;
    for (std::size_t k = begin; k < end; ++k) {
      gpu::generation_request r;
      r.id = k;
      r.prompt = config.prompts[k];
      r.sampling = config.sampling;
      r.rng = gpu::rng_coordinates{config.seed, pass.report.step, validation_round, static_cast<std::uint32_t>(k), 0, 0};
      r.max_new_tokens = config.max_new_tokens;
      r.stop_tokens = config.stop_tokens;
      jobs[k % workers].requests.push_back(std::move(r));
    }
    std::vector<std::size_t> used, asked;  // the workers with prompts, and how many each got
    std::vector<rollout_actor> targets;
    std::vector<generate_job> sent;
    for (std::size_t w = 0; w < workers; ++w) {
      if (jobs[w].requests.empty()) continue;
      used.push_back(w);
      asked.push_back(jobs[w].requests.size());
      targets.push_back(config.rollout[w]);
      sent.push_back(std::move(jobs[w]));
    }
    fan_out<generate_result>(
        self, targets, std::move(sent), config.timeout, generate_atom_v,
        [this, serial = pass.serial] { return serial == pass.serial; }, no_progress{},
        [this, used, asked](std::vector<generate_result>& results) { generated(results, used, asked); },
        [this, used](std::size_t i, caf::error& e) {
          fail(relay_error(e, where() + ": generate on rollout worker " + std::to_string(used[i])));
        });
  }

  void generated(std::vector<generate_result>& results, const std::vector<std::size_t>& used,
                 const std::vector<std::size_t>& asked) {
    auto& out = pass.round;
    out.clear();
    for (std::size_t i = 0; i < results.size(); ++i) {
      auto& r = results[i];
      const std::string name = r.worker.empty() ? "rollout worker " + std::to_string(used[i]) : r.worker;
      if (r.trajectories.size() != asked[i])
        return fail(tandem_error(tandem_errc::engine_failure, where() + ": " + name + " returned " +
                                                                  std::to_string(r.trajectories.size()) + " responses for " +
                                                                  std::to_string(asked[i]) + " prompts"));
      for (auto& t : r.trajectories) {
        if (t.weight_version != pass.report.version)
          return fail(tandem_error(tandem_errc::stale_version, where() + ": " + t.worker + " returned response " +
                                                                   std::to_string(t.id) + " of " + v(t.weight_version) + ", " +
                                                                   v(pass.report.version) + " was asked for"));
        t.record = t.id;  // the request id is the prompt's index in the validation set
        if (t.record < config.answers.size()) t.answer = config.answers[t.record];
        out.push_back(std::move(t));
      }
    }
    std::sort(out.begin(), out.end(), [](const trajectory& a, const trajectory& b) { return a.id < b.id; });
    for (std::size_t i = 0; i < out.size(); ++i)
      if (out[i].id != pass.next_prompt + i)
        return fail(tandem_error(tandem_errc::engine_failure, where() + ": " + out[i].worker + " returned response " +
                                                                  std::to_string(out[i].id) + ", which was not asked for"));
    scoring();
  }

  // ---- scoring ----------------------------------------------------------------------------------

  void scoring() {
    self->become(busy("scoring"));
    score_job job{pass.report.step, pass.round};
    const std::size_t n = job.trajectories.size();
    self->request(config.environment, config.timeout, score_atom_v, std::move(job))
        .then(
            [this, serial = pass.serial, n](score_result& r) {
              if (serial != pass.serial) return;
              if (r.feedback.size() != n)
                return fail(tandem_error(tandem_errc::engine_failure, where() + ": the environment scored " +
                                                                          std::to_string(r.feedback.size()) + " of " +
                                                                          std::to_string(n) + " responses"));
              scored(r);
            },
            failing("scoring by the environment"));
  }

  void scored(const score_result& r) {
    for (std::size_t i = 0; i < pass.round.size(); ++i) {
      trajectory& t = pass.round[i];
      const double reward = r.feedback[i].reward;
      pass.rewards.push_back(reward);
      pass.lengths.push_back(static_cast<std::int64_t>(t.tokens.size()));
      pass.report.samples.push_back(validation_sample{t.prompt_index, std::move(t.prompt), std::move(t.tokens), t.reason,
                                                      reward, std::move(t.worker)});
    }
    pass.next_prompt += pass.round.size();
    pass.round.clear();
    if (pass.next_prompt < config.prompts.size()) return generating();
    finished();
  }

  void finished() {
    auto m = rl::compute_validation_metrics(pass.rewards, pass.lengths, 1);
    if (!m) return fail(tandem_error(tandem_errc::engine_failure, where() + ": the environment's rewards: " + m.error().message));
    pass.report.accuracy = m->accuracy;
    pass.report.avg_length = m->avg_length;
    pass.report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - pass.started).count();
    pass.serial = 0;
    self->become(idle());
    pass.promise.deliver(std::move(pass.report));
  }
};

behavior validation(validation_actor::stateful_pointer<validation_state> self, validation_config config) {
  auto& st = self->state;
  st.self = self;
  st.config = std::move(config);
  return st.idle();
}

}  // namespace

validation_actor spawn_validation(caf::actor_system& sys, validation_config config) {
  return sys.spawn(validation, std::move(config));
}

}  // namespace tandem
