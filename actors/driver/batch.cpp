// The policy ranks' work of a step (batch.hpp).
#include "actors/driver/batch.hpp"

namespace tandem {

gpu::packed_sequences pack_sequences(const std::vector<trajectory>& trajectories, const std::vector<std::size_t>& indices) {
  gpu::packed_sequences out;
  out.offsets.push_back(0);
  for (const std::size_t i : indices) {
    const auto& t = trajectories[i];
    out.tokens.insert(out.tokens.end(), t.prompt.begin(), t.prompt.end());
    out.tokens.insert(out.tokens.end(), t.tokens.begin(), t.tokens.end());
    out.offsets.push_back(static_cast<std::int32_t>(out.tokens.size()));
  }
  return out;
}

std::vector<std::size_t> rank_trajectories(const std::vector<rl::global_batch>& plan, std::size_t rank) {
  std::vector<std::size_t> out;
  for (const auto& b : plan) {
    const auto& shard = b.rank_shards[rank];
    for (auto i = shard.begin; i < shard.end; ++i) out.push_back(static_cast<std::size_t>(i));
  }
  return out;
}

logprobs_job make_logprobs_job(std::uint32_t step, weight_version version, const std::vector<trajectory>& trajectories,
                               const std::vector<std::size_t>& indices, const gpu::ops::sampling_params& sampling,
                               bool reference) {
  logprobs_job job;
  job.step = step;
  job.version = version;
  job.sequences = pack_sequences(trajectories, indices);
  for (const std::size_t i : indices) {
    const auto& t = trajectories[i];
    job.prompt_tokens.push_back(static_cast<std::int32_t>(t.prompt.size()));
    job.generated_with.push_back(t.weight_version);
    // One generator logprob per generated token (an engine that returned fewer is padded with 0,
    // so the rank's inputs stay aligned; the fakes and the CPU engine return all of them).
    for (std::size_t k = 0; k < t.tokens.size(); ++k) job.lp_gen.push_back(k < t.logprobs.size() ? t.logprobs[k] : 0.0f);
  }
  job.sampling = sampling;
  job.reference = reference;
  return job;
}

gpu::global_counts count_masked(const std::vector<trajectory>& trajectories, std::size_t begin, std::size_t end,
                                const std::vector<double>& loss_multipliers, const std::vector<std::int32_t>& excluded) {
  gpu::global_counts c;
  for (std::size_t i = begin; i < end; ++i) {
    if (!loss_multipliers.empty() && loss_multipliers[i] == 0.0) continue;
    const auto tokens = static_cast<std::int64_t>(trajectories[i].tokens.size()) - (excluded.empty() ? 0 : excluded[i]);
    c.tokens += tokens;
    if (tokens > 0) c.sequences += 1;
  }
  return c;
}

train_job make_train_job(std::uint32_t step, weight_version version, const std::vector<rl::global_batch>& plan,
                         std::size_t rank, const std::vector<trajectory>& trajectories,
                         const std::vector<double>& advantages, const std::vector<double>& loss_multipliers,
                         const std::vector<std::int32_t>& excluded, std::int64_t micro_batch_tokens) {
  train_job job;
  job.step = step;
  job.version = version;
  for (const std::size_t i : rank_trajectories(plan, rank)) {
    job.advantages.push_back(advantages[i]);
    job.loss_multipliers.push_back(loss_multipliers.empty() ? 1.0 : loss_multipliers[i]);
  }
  for (const auto& b : plan) {
    optimizer_share share;
    share.sequences = static_cast<std::size_t>(b.rank_shards[rank].size());
    share.counts = count_masked(trajectories, static_cast<std::size_t>(b.samples.begin),
                                static_cast<std::size_t>(b.samples.end), loss_multipliers, excluded);
    job.optimizer_steps.push_back(share);
  }
  job.micro_batch_tokens = micro_batch_tokens;
  return job;
}

}  // namespace tandem
