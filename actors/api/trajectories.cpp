// Trajectories from finished sequences (trajectories.hpp).
#include "actors/api/trajectories.hpp"

#include <unordered_map>
#include <utility>

namespace tandem {

std::optional<std::string> assemble_trajectories(const generate_job& job, std::vector<gpu::finished_sequence> finished,
                                                 const std::string& worker, std::vector<trajectory>& out) {
  std::unordered_map<std::uint64_t, std::size_t> index_of;
  for (std::size_t i = 0; i < job.requests.size(); ++i) {
    if (!index_of.emplace(job.requests[i].id, i).second)
      return "the job asks for request " + std::to_string(job.requests[i].id) + " twice";
  }
  out.assign(job.requests.size(), trajectory{});
  std::vector<bool> seen(job.requests.size(), false);
  for (auto& f : finished) {
    const auto it = index_of.find(f.id);
    if (it == index_of.end()) return "a sequence for request " + std::to_string(f.id) + ", which the job did not ask for";
    if (seen[it->second]) return "two sequences for request " + std::to_string(f.id);
    if (f.weight_version != job.version)
      return "mixed versions: sequence " + std::to_string(f.id) + " was generated with v" +
             std::to_string(f.weight_version) + ", the job asked for v" + std::to_string(job.version);
    const auto& request = job.requests[it->second];
    seen[it->second] = true;
    trajectory& t = out[it->second];
    static_cast<gpu::finished_sequence&>(t) = std::move(f);
    t.prompt_index = request.rng.prompt;
    t.sample_index = request.rng.sample;
    t.round = request.rng.round;
    t.prompt = request.prompt;
    t.worker = worker;
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) return "request " + std::to_string(job.requests[i].id) + " was never finished";
  }
  return std::nullopt;
}

}  // namespace tandem
