// `tandem bench generate --model DIR [--batch B] [--prompt-len P] [--new-tokens N] [--backend cpu|cuda]
//  [--dtype fp32|bf16] [--temperature T --top-k K --top-p P] [--prefill-budget R] [--seed N] [--profile] [--profiler-range]
//  [--agreement] [--overlap on|off] [--json FILE]`:
// one batch of sampled generations by the Gemma 4 generate engine over random initial weights,
// beside the decode step's GEMM-only ceiling and memory roofline measured in the same run
// (generate_bench.h); --profile adds the decode steps' time op by op (gpu/core/op_profile.h);
// --profiler-range brackets one replayed decode step for `ncu --profile-from-start off`;
// --agreement how closely a train engine scores a batch sampled at temperature 0.7, top-k 20,
// top-p 0.9 (generate_agreement.h); --overlap off runs decode steps one at a time (the engine
// otherwise enqueues the next before it reads the last one's tokens).
#include <cstdio>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "gpu/ops/linear.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/fixed_digits.h"
#include "tools/cli/compute_choice.h"
#include "tools/cli/generate_bench.h"

namespace tandem::cli {
namespace {

constexpr const char* usage =
    "usage: tandem bench generate --model DIR [--batch B] [--prompt-len P] [--new-tokens N]\n"
    "                             [--backend cpu|cuda] [--dtype fp32|bf16] [--temperature T --top-k K --top-p P]\n"
    "                             [--prefill-budget R] [--seed N] [--profile] [--profiler-range] [--agreement]\n"
    "                             [--overlap on|off] [--json FILE]\n";

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30); }

}  // namespace

int bench_generate_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a,
                                         {"--model", "--batch", "--prompt-len", "--new-tokens", "--backend", "--dtype", "--temperature",
                                          "--top-k", "--top-p", "--prefill-budget", "--seed", "--overlap", "--json"},
                                         {"--profile", "--agreement", "--profiler-range"});
  if (!p.problem.empty()) {
    err << "tandem bench generate: " << p.problem << "\n" << usage;
    return exit_usage;
  }
  if (!p.values.count("--model")) {
    err << "tandem bench generate: missing --model DIR\n" << usage;
    return exit_usage;
  }
  generate_bench_settings s;
  s.model = p.values.at("--model");
  s.profile = p.flags.count("--profile") > 0;
  s.profiler_range = p.flags.count("--profiler-range") > 0;
  if (p.flags.count("--agreement") > 0) s.agreement = gpu::ops::sampling_params{0.7, 20, 0.9};
  if (const auto it = p.values.find("--overlap"); it != p.values.end()) {
    if (it->second != "on" && it->second != "off") {
      err << "tandem bench generate: --overlap '" << it->second << "': expected on or off\n" << usage;
      return exit_usage;
    }
    s.overlap = it->second == "on";
  }
  const struct {
    const char* name;
    long long min, max;
    std::function<void(long long)> set;
  } counts[] = {{"--batch", 1, 1 << 20, [&](long long v) { s.batch = v; }},
                {"--prompt-len", 1, 1 << 24, [&](long long v) { s.prompt_len = v; }},
                {"--new-tokens", 1, 1 << 24, [&](long long v) { s.new_tokens = v; }},
                {"--prefill-budget", 1, 1 << 24, [&](long long v) { s.prefill_token_budget = v; }},
                {"--seed", 0, std::int64_t{1} << 62, [&](long long v) { s.seed = static_cast<std::uint64_t>(v); }}};
  for (const auto& c : counts) {
    const auto it = p.values.find(c.name);
    if (it == p.values.end()) continue;
    const auto v = parse_integer(it->second);
    if (!v || *v < c.min || *v > c.max) {
      err << "tandem bench generate: " << c.name << " '" << it->second << "': expected a whole number from " << c.min << " to "
          << c.max << "\n";
      return exit_usage;
    }
    c.set(*v);
  }
  if (s.batch * (s.prompt_len + s.new_tokens) > (std::int64_t{1} << 31) - 1) {
    err << "tandem bench generate: --batch x (--prompt-len + --new-tokens) must stay below 2^31 positions\n";
    return exit_usage;
  }
  std::string problem;
  if (auto t = number_option<double>(p, "--temperature", problem)) s.sampling.temperature = *t;
  if (auto k = number_option<std::int32_t>(p, "--top-k", problem)) s.sampling.top_k = *k;
  if (auto q = number_option<double>(p, "--top-p", problem)) s.sampling.top_p = *q;
  if (!problem.empty()) {
    err << "tandem bench generate: " << problem << "\n";
    return exit_usage;
  }
  if (gpu::status st = gpu::ops::check_sampling_params("tandem bench generate", s.sampling, true); !st) {
    err << st.message() << "\n";
    return exit_usage;
  }
  bool refused = false;
  const auto choice = parse_compute_choice(p, problem, refused);
  if (!choice) {
    err << "tandem bench generate: " << problem << "\n";
    return refused ? exit_refused : exit_usage;
  }
  s.dev = choice->dev;
  s.weights = choice->type;

  const auto f = run_generate_bench(s);
  if (!f) {
    err << "tandem bench generate: " << f.error().message() << "\n";
    return exit_refused;
  }
  out << "tandem bench generate: " << s.model.string() << " (" << f->parameters << " parameters, random initial weights, seed " << s.seed
      << ") on " << s.dev.to_string() << ", " << gpu::to_string(s.weights) << " weights, activations and KV cache\n"
      << "  batch " << s.batch << " x (" << s.prompt_len << "-token prompt + " << s.new_tokens << " new tokens), sampling at temperature "
      << s.sampling.temperature << ", top-k " << s.sampling.top_k << ", top-p " << s.sampling.top_p << "; KV cache "
      << fixed(gib(f->kv_cache_bytes), 3) << " GiB, weights " << fixed(gib(f->weights_bytes), 3) << " GiB; " << f->preemptions
      << " preemptions\n"
      << "  " << fixed(f->tokens_per_s, 0) << " generated tokens/s: " << fixed(f->total_ms, 1) << " ms in all, prefill steps "
      << fixed(f->prefill_ms, 1) << " ms, " << f->decode_steps << " decode steps of " << fixed(f->decode_step_ms_median, 3)
      << " ms median (" << fixed(f->decode_step_ms_mean, 3) << " mean, " << fixed(f->host_waits_per_decode_step, 2)
      << " host waits for the device each, " << fixed(f->decode_host_ms_mean, 3)
      << " ms outside them, enqueueing; " << f->overlapped_steps
      << " enqueued before the last one's tokens were read); mean logprob of a sampled token " << fixed(f->mean_logprob, 3)
      << "\n"
      << "  decode GEMM-only ceiling (a decode step's matrix products at " << s.batch
      << " rows through the linear op, same device and dtype, this run): " << fixed(f->decode_gemm_ceiling_ms, 3)
      << " ms; the decode step runs at " << fixed(100 * f->ceiling_fraction, 1) << "% of its speed\n"
      << "  decode roofline (" << fixed(f->decode_bytes / 1e9, 3) << " GB of weights and visible K/V a step at "
      << fixed(f->copy_gb_per_s, 1) << " GB/s, this run's device copy): " << fixed(f->roofline_ms, 3) << " ms; the decode step runs at "
      << fixed(100 * f->roofline_fraction, 1) << "% of it\n";
  if (f->agreement) {
    const agreement_figures& a = *f->agreement;
    out << "  train/generate agreement (" << a.sequences << " sequences sampled at temperature " << a.sampling.temperature << ", top-k "
        << a.sampling.top_k << ", top-p " << a.sampling.top_p << "; " << a.tokens
        << " generated tokens scored by a train engine over the same weights): token_mult_prob_error mean "
        << fixed(a.mean_error, 6) << ", median over sequences " << fixed(a.median_sequence_error, 6) << ", largest "
        << fixed(a.max_error, 6) << "; " << a.identical << " of " << a.tokens << " logprobs the same bits ("
        << fixed(a.tokens > 0 ? 100.0 * static_cast<double>(a.identical) / static_cast<double>(a.tokens) : 0.0, 2) << "%)\n";
  }
  if (s.profile && f->profiled_steps > 0) {
    double total = 0;
    for (const auto& t : f->profile) total += t.ms;
    const auto steps = static_cast<double>(f->profiled_steps);
    out << "  profile of " << f->profiled_steps
        << " decode steps (per step; each op charged from its start to the next one's, idle device time included):\n";
    for (const auto& t : f->profile) {
      char row[256];
      std::snprintf(row, sizeof row, "    %-36s %8.1f calls %10.3f ms %6.1f%%\n", t.name.c_str(), static_cast<double>(t.calls) / steps,
                    t.ms / steps, total > 0 ? 100 * t.ms / total : 0.0);
      out << row;
    }
  }
  if (s.profile) {
    const std::vector<std::string> choices = gpu::ops::linear_algorithm_choices();
    if (!choices.empty()) out << "  small-row GEMM algorithms (chosen once per shape and row bucket, timed at the call's shape):\n";
    for (const std::string& line : choices) out << "    " << line << "\n";
  }
  if (const auto it = p.values.find("--json"); it != p.values.end()) {
    nlohmann::json j = {{"model", s.model.string()},
                              {"device", s.dev.to_string()},
                              {"weights_dtype", std::string(gpu::to_string(s.weights))},
                              {"parameters", f->parameters},
                              {"batch", s.batch},
                              {"prompt_len", s.prompt_len},
                              {"new_tokens", s.new_tokens},
                              {"temperature", s.sampling.temperature},
                              {"top_k", s.sampling.top_k},
                              {"top_p", s.sampling.top_p},
                              {"weights_bytes", f->weights_bytes},
                              {"kv_cache_bytes", f->kv_cache_bytes},
                              {"total_ms", f->total_ms},
                              {"tokens_per_s", f->tokens_per_s},
                              {"prefill_ms", f->prefill_ms},
                              {"decode_steps", f->decode_steps},
                              {"decode_step_ms_median", f->decode_step_ms_median},
                              {"decode_step_ms_mean", f->decode_step_ms_mean},
                              {"host_waits_per_decode_step", f->host_waits_per_decode_step},
                              {"overlapped_steps", f->overlapped_steps},
                              {"decode_host_ms_mean", f->decode_host_ms_mean},
                              {"decode_gemm_ceiling_ms", f->decode_gemm_ceiling_ms},
                              {"ceiling_fraction", f->ceiling_fraction},
                              {"decode_bytes", f->decode_bytes},
                              {"copy_gb_per_s", f->copy_gb_per_s},
                              {"roofline_ms", f->roofline_ms},
                              {"roofline_fraction", f->roofline_fraction},
                              {"preemptions", f->preemptions},
                              {"mean_logprob", f->mean_logprob}};
    if (f->agreement) {
      const agreement_figures& a = *f->agreement;
      j["agreement"] = {{"temperature", a.sampling.temperature}, {"top_k", a.sampling.top_k}, {"top_p", a.sampling.top_p},
                        {"sequences", a.sequences}, {"tokens", a.tokens}, {"identical", a.identical},
                        {"token_mult_prob_error_mean", a.mean_error}, {"token_mult_prob_error_median_sequence", a.median_sequence_error},
                        {"token_mult_prob_error_max", a.max_error}};
    }
    std::ofstream file(it->second);
    file << j.dump(2) << "\n";
    file.close();
    if (!file) {
      err << "tandem bench generate: --json " << it->second << ": cannot write it\n";
      return exit_refused;
    }
  }
  return exit_ok;
}

}  // namespace tandem::cli
