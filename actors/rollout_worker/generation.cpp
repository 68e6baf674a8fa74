// Generation of one job to completion (generation.hpp).
#include "actors/rollout_worker/generation.hpp"

#include <unordered_set>
#include <utility>

#include "actors/api/trajectories.hpp"

namespace tandem {
namespace {

/// An upper bound on the steps a job can take: every token of every request, one admission step
/// each, and some slack. An engine that never finishes is reported instead of spinning forever.
std::int64_t step_limit(const generate_job& job) {
  std::int64_t n = 16;
  for (const auto& r : job.requests) n += static_cast<std::int64_t>(r.max_new_tokens) + 2;
  return n;
}

/// Steps until nothing waits or runs, discarding what finishes; the outcome of the last step.
gpu::status drain(gpu::generate_engine& engine, std::int64_t limit) {
  for (std::int64_t i = 0; i < limit; ++i) {
    auto left = engine.step();
    if (!left) return left.error();
    (void)engine.collect();
    if (*left == 0) return gpu::status::ok();
  }
  return {gpu::status_code::device_error, "the engine did not drain within " + std::to_string(limit) + " steps"};
}

}  // namespace

gpu::result<std::vector<trajectory>> run_generation(gpu::generate_engine& engine, const generate_job& job,
                                                    const std::string& worker) {
  std::unordered_set<std::uint64_t> ids;
  for (const auto& r : job.requests) {
    if (!ids.insert(r.id).second)
      return gpu::status{gpu::status_code::invalid_argument, "duplicate request id " + std::to_string(r.id)};
  }
  if (auto s = engine.submit(job.requests); !s) return s;

  std::vector<gpu::finished_sequence> done;
  const std::int64_t limit = step_limit(job);
  bool finished = false;
  for (std::int64_t i = 0; i < limit && !finished; ++i) {
    auto left = engine.step();
    if (!left) {
      auto drained = drain(engine, limit);
      std::string text = "step: " + left.error().message();
      if (!drained) text += "; draining the engine failed too: " + drained.message();
      return gpu::status{left.error().code(), text};
    }
    for (auto& f : engine.collect()) done.push_back(std::move(f));
    finished = *left == 0;
  }
  if (!finished)
    return gpu::status{gpu::status_code::device_error,
                       "generation did not finish within " + std::to_string(limit) + " steps"};
  for (auto& f : engine.collect()) done.push_back(std::move(f));

  std::vector<trajectory> out;
  if (auto problem = assemble_trajectories(job, std::move(done), worker, out))
    return gpu::status{gpu::status_code::device_error, "the engine's sequences: " + *problem};
  return out;
}

}  // namespace tandem
