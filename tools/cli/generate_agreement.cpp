// The train engine's scores of the generate engine's samples (generate_agreement.h).
#include "tools/cli/generate_agreement.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "gpu/engine/gemma4_train_engine.h"
#include "tools/cli/bench_model.h"
#include "tools/cli/generate_bench.h"

namespace tandem::cli {
namespace {

gpu::status fail(const std::string& what, const gpu::status& s) { return {s.code(), "agreement: " + what + ": " + s.message()}; }

}  // namespace

gpu::result<agreement_figures> measure_agreement(const generate_bench_settings& s, const gpu::exec_context& ctx,
                                                 std::unique_ptr<gpu::gemma4_generate_engine> generator,
                                                 const gpu::ops::sampling_params& sampling, std::int64_t score_tokens) {
  agreement_figures f;
  f.sampling = sampling;
  // The batch's prompts of a round of their own, sampled at `sampling`.
  const std::int32_t vocab = static_cast<std::int32_t>(generator->config().vocab_size);
  std::mt19937_64 rng(s.seed + 3);
  std::vector<gpu::generation_request> requests;
  for (std::int64_t i = 0; i < s.batch; ++i) {
    gpu::generation_request r;
    r.id = static_cast<std::uint64_t>(i);
    for (std::int64_t t = 0; t < s.prompt_len; ++t) r.prompt.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab)));
    r.max_new_tokens = static_cast<std::int32_t>(s.new_tokens);
    r.sampling = sampling;
    r.rng = {s.seed, 3, 0, static_cast<std::uint32_t>(i), 0, 0};
    requests.push_back(std::move(r));
  }
  if (auto st = generator->submit(requests); !st) return fail("submit", st);
  std::map<std::uint64_t, gpu::finished_sequence> done;
  for (;;) {
    auto left = generator->step();
    if (!left) return fail("generate", left.error());
    for (auto& d : generator->collect()) done.emplace(d.id, std::move(d));
    if (*left == 0) break;
  }
  if (done.size() != requests.size())
    return gpu::status{gpu::status_code::invalid_argument, "agreement: the generator finished " + std::to_string(done.size()) +
                                                               " of " + std::to_string(requests.size()) + " sequences"};
  generator.reset();  // its weights and KV cache make room for the trainer

  auto model = random_bench_model(s.model, s.weights, s.dev, s.seed);
  if (!model) return fail("the trainer's weights", model.error());
  gpu::train_engine_options o;
  o.master_dtype = o.first_moment_dtype = o.second_moment_dtype = s.weights;  // only scores: the smallest state
  auto trainer = gpu::gemma4_train_engine::create_with_weights(ctx, std::move(model->source), std::move(model->weights), o);
  if (!trainer) return fail("the train engine", trainer.error());

  std::vector<double> sequence_errors;
  double error_sum = 0;
  for (std::size_t first = 0; first < requests.size();) {
    gpu::packed_sequences batch{{}, {0}};
    std::vector<std::size_t> members;
    while (first + members.size() < requests.size()) {
      const auto& r = requests[first + members.size()];
      const auto length = static_cast<std::int64_t>(r.prompt.size() + done.at(r.id).tokens.size());
      if (!members.empty() && static_cast<std::int64_t>(batch.tokens.size()) + length > score_tokens) break;
      batch.tokens.insert(batch.tokens.end(), r.prompt.begin(), r.prompt.end());
      batch.tokens.insert(batch.tokens.end(), done.at(r.id).tokens.begin(), done.at(r.id).tokens.end());
      batch.offsets.push_back(static_cast<std::int32_t>(batch.tokens.size()));
      members.push_back(first + members.size());
    }
    auto scores = (*trainer)->logprobs(batch, sampling);
    if (!scores) return fail("scoring", scores.error());
    for (std::size_t m = 0; m < members.size(); ++m) {
      const auto& r = requests[members[m]];
      const auto& gen = done.at(r.id);
      const std::size_t start = static_cast<std::size_t>(batch.offsets[m]) + r.prompt.size();
      double sum = 0;
      for (std::size_t t = 0; t < gen.tokens.size(); ++t) {
        const float train = (*scores)[start + t], sampled = gen.logprobs[t];
        const double e = std::exp(std::fabs(static_cast<double>(train) - static_cast<double>(sampled)));
        f.identical += std::memcmp(&train, &sampled, sizeof train) == 0;
        f.max_error = std::max(f.max_error, e);
        sum += e;
      }
      error_sum += sum;
      f.tokens += static_cast<std::int64_t>(gen.tokens.size());
      if (!gen.tokens.empty()) sequence_errors.push_back(sum / static_cast<double>(gen.tokens.size()));
    }
    first += members.size();
  }
  f.sequences = static_cast<std::int64_t>(requests.size());
  if (f.tokens > 0) f.mean_error = error_sum / static_cast<double>(f.tokens);
  if (!sequence_errors.empty()) {
    std::sort(sequence_errors.begin(), sequence_errors.end());
    f.median_sequence_error = sequence_errors[sequence_errors.size() / 2];
  }
  return f;
}

}  // namespace tandem::cli
