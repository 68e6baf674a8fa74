// The environment pool and its workers (environment.hpp).
#include "actors/environment/environment.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/typed_event_based_actor.hpp>

#include "actors/api/error_context.hpp"

namespace tandem {
namespace {

struct environment_state {
  static inline const char* name = "environment";

  environment_actor::stateful_pointer<environment_state> self = nullptr;
  environment_config config;
  std::vector<environment_actor> workers;
  std::size_t next = 0;  // the worker that gets the next job's first chunk

  caf::result<score_result> score(score_job& job) {
    const std::size_t n = job.trajectories.size();
    if (n == 0) return score_result{};
    const std::size_t chunks = std::min(workers.size(), n);
    struct gather {
      std::vector<std::optional<score_result>> parts;
      std::size_t left = 0;
      std::optional<caf::error> failure;
    };
    auto g = std::make_shared<gather>();
    g->parts.resize(chunks);
    g->left = chunks;
    auto rp = self->make_response_promise<score_result>();
    auto finish = [g, rp]() mutable {
      if (g->failure) {
        rp.deliver(*g->failure);
        return;
      }
      score_result out;
      for (auto& p : g->parts) {
        for (auto& f : p->feedback) out.feedback.push_back(std::move(f));
      }
      rp.deliver(std::move(out));
    };
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::size_t begin = n * c / chunks, end = n * (c + 1) / chunks;
      score_job part{job.step, {}};
      part.trajectories.assign(std::make_move_iterator(job.trajectories.begin() + static_cast<std::ptrdiff_t>(begin)),
                               std::make_move_iterator(job.trajectories.begin() + static_cast<std::ptrdiff_t>(end)));
      const std::size_t w = (next + c) % workers.size();
      const std::size_t expected = end - begin;
      self->request(workers[w], config.timeout, score_atom_v, std::move(part))
          .then(
              [g, c, w, expected, finish](score_result& r) mutable {
                if (r.feedback.size() != expected && !g->failure)
                  g->failure = tandem_error(tandem_errc::engine_failure,
                                            "environment worker " + std::to_string(w) + ": " +
                                                std::to_string(r.feedback.size()) + " rewards for " +
                                                std::to_string(expected) + " trajectories");
                g->parts[c] = std::move(r);
                if (--g->left == 0) finish();
              },
              [g, w, finish](caf::error& e) mutable {
                if (!g->failure) g->failure = relay_error(e, "environment worker " + std::to_string(w));
                if (--g->left == 0) finish();
              });
    }
    next = (next + chunks) % workers.size();
    return rp;
  }
};

environment_actor::behavior_type environment_pool(environment_actor::stateful_pointer<environment_state> self,
                                                  environment_config config) {
  auto& st = self->state;
  st.self = self;
  const std::size_t n = std::max<std::size_t>(1, config.workers);
  for (std::size_t i = 0; i < n; ++i) {
    if (config.execution == engine_execution::off_scheduler) {
      st.workers.push_back(self->spawn<caf::detached + caf::linked>(environment_worker, config.score));
    } else {
      st.workers.push_back(self->spawn<caf::linked>(environment_worker, config.score));
    }
  }
  st.config = std::move(config);
  return {[self](score_atom, score_job& job) { return self->state.score(job); }};
}

}  // namespace

environment_actor::behavior_type environment_worker(environment_actor::pointer, scoring_function score) {
  return {[score](score_atom, const score_job& job) -> caf::result<score_result> {
    if (!score) return tandem_error(tandem_errc::invalid_config, "no scoring function (environment_config::score is empty)");
    score_result out;
    out.feedback.reserve(job.trajectories.size());
    for (const auto& t : job.trajectories) {
      auto f = score(t);
      if (!f) return relay_error(f.error(), "scoring step " + std::to_string(job.step));
      out.feedback.push_back(std::move(*f));
    }
    return out;
  }};
}

environment_actor spawn_environment(caf::actor_system& sys, environment_config config) {
  return sys.spawn(environment_pool, std::move(config));
}

}  // namespace tandem
