// One request to each of several actors at once, answered together: every phase of the driver
// (generate on the rollout workers, logprobs and train on the policy ranks) and each round of a
// validation pass is one fan-out.
//
//   fan_out --job i--> target i (every i at once, each with the deadline)
//   reply i  --current()?--> arrived(i, reply); the last one --> done(replies in target order)
//   error i  --current()?--> failed(i, error)
//
// current() is the requester's own test that it still waits for these answers (its step or pass
// is the one that sent them): a reply or error that comes after it failed or moved on is dropped.
// The requester fails on the first error, so failed() runs at most once while current.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/error.hpp>

namespace tandem {

/// Sends `jobs[i]` to `targets[i]` (same length) with `atom` and `timeout`, and gathers the
/// replies as the comment above says. With no target, done() runs at once with none.
template <class Reply, class Self, class Target, class Job, class Atom, class Current, class Arrived, class Done,
          class Failed>
void fan_out(Self* self, const std::vector<Target>& targets, std::vector<Job> jobs, std::chrono::milliseconds timeout,
             Atom atom, Current current, Arrived arrived, Done done, Failed failed) {
  struct gathered {
    std::vector<std::optional<Reply>> replies;
    std::size_t left = 0;
  };
  if (targets.empty()) {
    std::vector<Reply> none;
    done(none);
    return;
  }
  auto g = std::make_shared<gathered>();
  g->replies.resize(targets.size());
  g->left = targets.size();
  for (std::size_t i = 0; i < targets.size(); ++i) {
    self->request(targets[i], timeout, atom, std::move(jobs[i]))
        .then(
            [g, i, current, arrived, done](Reply& r) mutable {
              if (!current()) return;
              arrived(i, r);
              g->replies[i] = std::move(r);
              if (--g->left > 0) return;
              std::vector<Reply> all;
              all.reserve(g->replies.size());
              for (auto& x : g->replies) all.push_back(std::move(*x));
              done(all);
            },
            [i, current, failed](caf::error& e) mutable {
              if (current()) failed(i, e);
            });
  }
}

/// An arrived() for a fan-out that needs no progress.
struct no_progress {
  template <class Reply>
  void operator()(std::size_t, const Reply&) const {}
};

}  // namespace tandem
