// `tandem generate --model DIR --tokens FILE --max-new-tokens N [--greedy | --temperature T
// --top-k K --top-p P --seed S] [--stop ID ...] [--backend cpu|cuda] [--dtype fp32|bf16]`:
// continues every prompt of FILE (a JSON array of token-id arrays) with the Gemma 4 generate
// engine on the chosen device, all prompts in one continuous batch, and prints a JSON array with
// one {"tokens", "logprobs", "finish"} object per prompt.
#include <random>

#include <nlohmann/json.hpp>

#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/model/checkpoint.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/compute_choice.h"
#include "tools/cli/model_resolution.h"
#include "tools/cli/token_sequences.h"

namespace tandem::cli {
namespace {

/// KV pools that hold every prompt at its full length at once, so the one-shot command never
/// preempts: the positions of all sequences plus a partial block each, at the bytes per block of
/// kv_cache_options_for.
std::int64_t kv_bytes_for(const gpu::model_config& c, gpu::dtype type, const std::vector<std::vector<std::int32_t>>& prompts,
                          std::int64_t max_new, std::int64_t block) {
  const gpu::kv_cache_options per_mib = gpu::kv_cache_options_for(c, type, block, 1 << 20);
  const std::int64_t blocks_per_mib = std::max<std::int64_t>(1, std::max(per_mib.full_blocks, per_mib.sliding_blocks));
  std::int64_t blocks = 0;
  for (const auto& p : prompts) blocks += (static_cast<std::int64_t>(p.size()) + max_new + block - 1) / block + 2;
  return (blocks + blocks_per_mib - 1) / blocks_per_mib * (1 << 20);
}

}  // namespace

int generate_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(
      a, {"--model", "--tokens", "--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed", "--backend", "--dtype"},
      {"--greedy"}, {"--stop"});
  if (!p.problem.empty()) {
    err << "tandem generate: " << p.problem << "\n";
    return exit_usage;
  }
  for (const char* required : {"--model", "--tokens", "--max-new-tokens"}) {
    if (!p.values.count(required)) {
      err << "tandem generate: missing " << required << " (see `tandem help generate`)\n";
      return exit_usage;
    }
  }
  const bool greedy = p.flags.count("--greedy") != 0;
  for (const char* sampling : {"--temperature", "--top-k", "--top-p", "--seed"})
    if (greedy && p.values.count(sampling)) {
      err << "tandem generate: --greedy takes no " << sampling << "\n";
      return exit_usage;
    }
  std::string problem;
  gpu::ops::sampling_params params;
  if (greedy) params.temperature = 0;
  if (auto t = number_option<double>(p, "--temperature", problem)) params.temperature = *t;
  if (auto k = number_option<std::int32_t>(p, "--top-k", problem)) params.top_k = *k;
  if (auto q = number_option<double>(p, "--top-p", problem)) params.top_p = *q;
  const auto max_new = number_option<long long>(p, "--max-new-tokens", problem);
  const auto seed = number_option<long long>(p, "--seed", problem);
  std::vector<std::int32_t> stops;
  if (auto it = p.repeated.find("--stop"); it != p.repeated.end())
    for (const std::string& s : it->second) {
      const auto id = parse_integer(s);
      if (!id || *id < 0 || *id > INT32_MAX) problem = "option --stop: '" + s + "' is not a token id";
      else stops.push_back(static_cast<std::int32_t>(*id));
    }
  if (problem.empty() && (!max_new || *max_new <= 0 || *max_new > INT32_MAX)) problem = "--max-new-tokens must be a positive count";
  if (problem.empty() && seed && *seed < 0) problem = "--seed must be >= 0";
  if (!problem.empty()) {
    err << "tandem generate: " << problem << "\n";
    return exit_usage;
  }
  if (gpu::status s = gpu::ops::check_sampling_params("tandem generate", params, true); !s) {
    err << s.message() << "\n";
    return exit_usage;
  }
  bool refused = false;
  const auto choice = parse_compute_choice(p, problem, refused);
  if (!choice) {
    err << "tandem generate: " << problem << "\n";
    return refused ? exit_refused : exit_usage;
  }
  auto c = open_model_option("generate", p.values.at("--model"), choice->type, err);
  if (!c) return exit_refused;
  const auto prompts = read_sequences(p.values.at("--tokens"), c->config.vocab_size, problem);
  if (!prompts) {
    err << "tandem generate: " << problem << "\n";
    return exit_refused;
  }
  gpu::gemma4_generate_options o;
  std::size_t longest = 0;
  for (const auto& prompt : *prompts) longest = std::max(longest, prompt.size());
  o.max_sequence_length = std::max<std::int64_t>(2, static_cast<std::int64_t>(longest) + *max_new);
  o.max_num_sequences = std::max<std::int64_t>(1, static_cast<std::int64_t>(prompts->size()));
  o.kv_cache_bytes = kv_bytes_for(c->config, choice->type, *prompts, *max_new, o.kv_block_size);
  gpu::exec_context ctx;  // the engine keeps a workspace of its own
  ctx.dev = choice->dev;
  auto engine = gpu::gemma4_generate_engine::create(ctx, std::move(*c), o);
  if (!engine) {
    err << "tandem generate: " << engine.error().message() << "\n";
    return exit_refused;
  }
  const std::uint64_t run_seed = seed ? static_cast<std::uint64_t>(*seed) : std::random_device{}();
  std::vector<gpu::generation_request> requests;
  for (std::size_t i = 0; i < prompts->size(); ++i) {
    gpu::generation_request r;
    r.id = i;
    r.prompt = (*prompts)[i];
    r.sampling = params;
    r.rng = {run_seed, 0, 0, static_cast<std::uint32_t>(i), 0, 0};
    r.max_new_tokens = static_cast<std::int32_t>(*max_new);
    r.stop_tokens = stops;
    requests.push_back(std::move(r));
  }
  if (gpu::status s = (*engine)->submit(requests); !s) {
    err << "tandem generate: " << s.message() << "\n";
    return exit_refused;
  }
  std::vector<gpu::finished_sequence> done(requests.size());
  for (;;) {
    auto left = (*engine)->step();
    if (!left) {
      err << "tandem generate: " << left.error().message() << "\n";
      return exit_refused;
    }
    for (auto& f : (*engine)->collect()) done[f.id] = std::move(f);
    if (*left == 0) break;
  }
  nlohmann::json result = nlohmann::json::array();
  for (const gpu::finished_sequence& f : done)
    result.push_back({{"tokens", f.tokens},
                      {"logprobs", f.logprobs},
                      {"finish", f.reason == gpu::finish_reason::stop_token ? "stop" : "length"}});
  out << result.dump() << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
