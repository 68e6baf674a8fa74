// Batch assembly for logprobs and training (batch.hpp).
#include "actors/driver/batch.hpp"

#include <algorithm>
#include <map>

namespace tandem {

gpu::packed_sequences pack_sequences(const std::vector<trajectory>& trajectories, std::size_t begin, std::size_t end) {
  gpu::packed_sequences out;
  out.offsets.push_back(0);
  for (std::size_t i = begin; i < end; ++i) {
    const auto& t = trajectories[i];
    out.tokens.insert(out.tokens.end(), t.prompt.begin(), t.prompt.end());
    out.tokens.insert(out.tokens.end(), t.tokens.begin(), t.tokens.end());
    out.offsets.push_back(static_cast<std::int32_t>(out.tokens.size()));
  }
  return out;
}

namespace {

float multiplier(const std::vector<double>& loss_multipliers, std::size_t i) {
  return loss_multipliers.empty() ? 1.0f : static_cast<float>(loss_multipliers[i]);
}

}  // namespace

gpu::global_counts count_masked(const std::vector<trajectory>& trajectories, const std::vector<double>& loss_multipliers) {
  gpu::global_counts c;
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    const auto& t = trajectories[i];
    if (multiplier(loss_multipliers, i) == 0.0f) continue;
    c.tokens += static_cast<std::int64_t>(t.tokens.size());
    if (!t.tokens.empty()) c.sequences += 1;
  }
  return c;
}

std::vector<gpu::train_micro_batch_data> make_micro_batches(const std::vector<trajectory>& trajectories,
                                                            const std::vector<double>& advantages,
                                                            const std::vector<float>& lp_prev, std::size_t begin,
                                                            std::size_t end, std::int64_t token_budget,
                                                            const std::vector<double>& loss_multipliers) {
  std::vector<std::size_t> start(trajectories.size() + 1, 0);  // token offset of each trajectory in lp_prev
  for (std::size_t i = 0; i < trajectories.size(); ++i)
    start[i + 1] = start[i] + trajectories[i].prompt.size() + trajectories[i].tokens.size();

  std::vector<gpu::train_micro_batch_data> out;
  for (std::size_t first = begin, last = begin; first < end; first = last) {
    // [first, last): as many whole trajectories as the budget holds, at least one.
    last = first + 1;
    while (last < end && static_cast<std::int64_t>(start[last + 1] - start[first]) <= token_budget) ++last;
    gpu::train_micro_batch_data mb;
    mb.sequences = pack_sequences(trajectories, first, last);
    for (std::size_t i = first; i < last; ++i) {
      const auto& t = trajectories[i];
      const float adv = static_cast<float>(advantages[i]);
      const float m = multiplier(loss_multipliers, i);
      for (std::size_t k = 0; k < t.prompt.size(); ++k) {
        mb.advantages.push_back(adv);
        mb.mask.push_back(0.0f);
        mb.lp_gen.push_back(0.0f);
      }
      for (std::size_t k = 0; k < t.tokens.size(); ++k) {
        mb.advantages.push_back(adv);
        mb.mask.push_back(m);
        mb.lp_gen.push_back(k < t.logprobs.size() ? t.logprobs[k] : 0.0f);
      }
      mb.lp_prev.insert(mb.lp_prev.end(), lp_prev.begin() + static_cast<std::ptrdiff_t>(start[i]),
                        lp_prev.begin() + static_cast<std::ptrdiff_t>(start[i + 1]));
    }
    out.push_back(std::move(mb));
  }
  return out;
}

std::size_t shard_begin(std::size_t n, std::size_t parts, std::size_t r) { return parts == 0 ? 0 : n * r / parts; }

}  // namespace tandem
