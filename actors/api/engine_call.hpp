// Where the policy and rollout workers' blocking engine calls run (DESIGN.md section 1, "Threads").
//
// A train step or a generation batch blocks for seconds, so in production a worker actor never
// calls its engine on a CAF scheduler thread: it hands the call to its own executor (a detached
// actor, i.e. a thread of its own), marks itself busy, and finishes the request from the
// executor's reply through a response promise. Version queries, aborts and heartbeats are
// answered meanwhile; conflicting requests are refused with wrong_state.
//
// Deterministic tests run on CAF's test coordinator, which does not drive detached actors; there
// the calls run inline (synchronously in the handler), so message order is exact. Production uses
// engine_execution::off_scheduler.
//
//   worker --(engine_run_atom, engine_task)--> executor (detached)
//   executor: runs the task (the engine call), stores its result
//   executor --engine_done_atom--> worker: done(result)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/behavior.hpp>
#include <caf/duration.hpp>
#include <caf/error.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/spawn_options.hpp>

#include "actors/api/type_ids.hpp"
#include "gpu/core/status.h"

namespace tandem {

/// How a worker runs its engine calls.
enum class engine_execution {
  off_scheduler,  ///< production: on the worker's own thread (a detached executor actor)
  inline_calls,   ///< deterministic tests: synchronously inside the actor's handler
};

/// One engine call handed to an executor.
struct engine_task {
  std::function<void()> run;
};

}  // namespace tandem

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::engine_task)

namespace tandem {

/// The executor's behaviour: runs each task in arrival order and answers engine_done_atom.
/// `owner` names the worker it serves (CAF 0.17 mishandles spawn functions without arguments).
caf::behavior engine_executor(caf::event_based_actor* self, std::string owner);

/// Runs one worker's engine calls in the configured place. Not thread-safe: the owning actor
/// calls it from its handlers only; at most one call is in flight (the owner refuses others).
class engine_runner {
 public:
  engine_runner() = default;

  /// Spawns the executor (linked to `self`) in off_scheduler mode; `owner` names the worker.
  template <class Self>
  void init(Self* self, engine_execution mode, std::string owner) {
    mode_ = mode;
    if (mode == engine_execution::off_scheduler)
      executor_ = self->template spawn<caf::detached + caf::linked>(engine_executor, std::move(owner));
  }

  /// Runs `work()` (an engine call returning gpu::status or gpu::result<T>) and then
  /// `done(result)` on the actor's own thread. Inline: both now. Off the scheduler: work on the
  /// executor, done when its reply arrives; if the executor fails, done gets a device_error
  /// status naming the reason. `work` must own (or share) everything it touches.
  template <class Self, class Work, class Done>
  void run(Self* self, Work work, Done done) {
    using value = decltype(work());
    if (mode_ == engine_execution::inline_calls) {
      done(work());
      return;
    }
    auto out = std::make_shared<std::optional<value>>();
    engine_task task{[out, work = std::move(work)]() mutable { out->emplace(work()); }};
    auto on_error = [done](caf::error& e) mutable {
      done(value{gpu::status{gpu::status_code::device_error, "engine executor failed: " + caf::to_string(e)}});
    };
    self->request(executor_, caf::infinite, engine_run_atom_v, std::move(task))
        .then([out, done](engine_done_atom) mutable { done(std::move(**out)); }, std::move(on_error));
  }

  /// True when calls run inline: a call that waits for another actor (a collective) cannot
  /// complete then, since that actor runs on the same thread only after this handler returns.
  bool inline_calls() const { return mode_ == engine_execution::inline_calls; }

 private:
  engine_execution mode_ = engine_execution::off_scheduler;
  caf::actor executor_;
};

}  // namespace tandem
