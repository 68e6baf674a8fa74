// `tandem bench train --model DIR [--tokens N] [--micro-batch B] [--steps N] [--warmup N]
//  [--recompute none|selective|full] [--backend cpu|cuda] [--dtype fp32|bf16] [--optimizer-dtype fp32|bf16] [--seed N]
//  [--logprob-chunk N] [--profile] [--json FILE]`: train steps of the Gemma 4 engine over random initial weights, beside the
// GEMM-only ceiling of the same step measured in the same run (train_bench.h); --profile adds
// the timed steps' time op by op (gpu/core/op_profile.h).
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/fixed_digits.h"
#include "tools/cli/compute_choice.h"
#include "tools/cli/train_bench.h"

namespace tandem::cli {
namespace {

constexpr const char* usage =
    "usage: tandem bench train --model DIR [--tokens N] [--micro-batch B] [--steps N] [--warmup N]\n"
    "                          [--recompute none|selective|full] [--backend cpu|cuda] [--dtype fp32|bf16]\n"
    "                          [--optimizer-dtype fp32|bf16]\n"
    "                          [--seed N] [--logprob-chunk N] [--profile] [--json FILE]\n";

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30); }

// " 12.345 GiB", or nothing where the figure is unknown (-1: the CPU).
std::string in_use(std::int64_t bytes) { return bytes < 0 ? "" : " " + fixed(gib(bytes), 3) + " GiB"; }
nlohmann::json in_use_json(std::int64_t bytes) { return bytes < 0 ? nlohmann::json(nullptr) : nlohmann::json(bytes); }

}  // namespace

int bench_command(const args& a, std::ostream& out, std::ostream& err) {
  if (!a.empty() && a[0] == "generate") return bench_generate_command(args(a.begin() + 1, a.end()), out, err);
  if (!a.empty() && a[0] == "refit") return bench_refit_command(args(a.begin() + 1, a.end()), out, err);
  if (a.empty() || a[0] != "train") {
    err << "tandem bench: " << (a.empty() ? "missing what to benchmark" : "unknown benchmark '" + a[0] + "'") << " (train, generate, refit)\n"
        << usage;
    return exit_usage;
  }
  const parsed_options p = parse_options(
      args(a.begin() + 1, a.end()),
      {"--model", "--tokens", "--micro-batch", "--steps", "--warmup", "--recompute", "--backend", "--dtype", "--optimizer-dtype", "--seed",
       "--logprob-chunk", "--json"},
      {"--profile"});
  if (!p.problem.empty()) {
    err << "tandem bench train: " << p.problem << "\n" << usage;
    return exit_usage;
  }
  if (!p.values.count("--model")) {
    err << "tandem bench train: missing --model DIR\n" << usage;
    return exit_usage;
  }
  train_bench_settings s;
  s.model = p.values.at("--model");
  s.profile = p.flags.count("--profile") > 0;
  // Whole-number options with their lower bounds.
  const struct {
    const char* name;
    long long min;
    std::function<void(long long)> set;
  } counts[] = {{"--tokens", 2, [&](long long v) { s.tokens = v; }},
                {"--micro-batch", 1, [&](long long v) { s.micro_batch = v; }},
                {"--steps", 1, [&](long long v) { s.steps = static_cast<int>(v); }},
                {"--warmup", 0, [&](long long v) { s.warmup = static_cast<int>(v); }},
                {"--seed", 0, [&](long long v) { s.seed = static_cast<std::uint64_t>(v); }},
                {"--logprob-chunk", 1, [&](long long v) { s.logprob_chunk = v; }}};
  for (const auto& c : counts) {
    const auto it = p.values.find(c.name);
    if (it == p.values.end()) continue;
    const auto v = parse_integer(it->second);
    if (!v || *v < c.min || *v > (std::int64_t{1} << 30)) {
      err << "tandem bench train: " << c.name << " '" << it->second << "': expected a whole number from " << c.min << "\n";
      return exit_usage;
    }
    c.set(*v);
  }
  if (s.tokens * s.micro_batch > (std::int64_t{1} << 31) - 1) {
    err << "tandem bench train: --tokens x --micro-batch must stay below 2^31 tokens\n";
    return exit_usage;
  }
  if (const auto it = p.values.find("--recompute"); it != p.values.end()) {
    bool known = false;
    for (auto m : {gpu::recompute_mode::none, gpu::recompute_mode::selective, gpu::recompute_mode::full})
      if (it->second == gpu::to_string(m)) s.recompute = m, known = true;
    if (!known) {
      err << "tandem bench train: --recompute '" << it->second << "': expected none, selective or full\n";
      return exit_usage;
    }
  }
  std::string problem;
  bool refused = false;
  const auto choice = parse_compute_choice(p, problem, refused);
  if (!choice) {
    err << "tandem bench train: " << problem << "\n";
    return refused ? exit_refused : exit_usage;
  }
  s.dev = choice->dev;
  s.weights = choice->type;
  if (const auto it = p.values.find("--optimizer-dtype"); it != p.values.end()) {
    if (it->second != "fp32" && it->second != "bf16") {
      err << "tandem bench train: --optimizer-dtype '" << it->second << "': expected fp32 or bf16\n";
      return exit_usage;
    }
    s.bf16_optimizer = it->second == "bf16";
  }

  const auto f = run_train_bench(s);
  if (!f) {
    err << "tandem bench train: " << f.error().message() << "\n";
    return exit_refused;
  }
  const std::string optimizer = s.bf16_optimizer ? "bfloat16" : "float32";
  out << "tandem bench train: " << s.model.string() << " (" << f->parameters << " parameters, random initial weights, seed " << s.seed
      << ") on " << s.dev.to_string() << "\n"
      << "  " << gpu::to_string(s.weights) << " weights and gradients, " << optimizer << " master weights and AdamW moments, recompute " << gpu::to_string(s.recompute)
      << "\n"
      << "  micro-batch " << s.micro_batch << " x " << s.tokens << " tokens, one per step (logits of " << s.logprob_chunk
      << " tokens at once); " << s.steps << " timed steps after "
      << s.warmup << " warm-up; loss " << fixed(f->first_loss, 4) << " -> " << fixed(f->last_loss, 4) << "\n"
      << "  step " << fixed(f->step_ms_median, 2) << " ms median (" << fixed(f->step_ms_mean, 2) << " mean): "
      << fixed(f->tokens_per_s, 0) << " tokens/s, " << fixed(f->model_tflops, 3) << " model TFLOP/s (" << f->flops_per_step
      << " FLOP a step)\n"
      << "  GEMM-only ceiling (the step's matrix products through the linear op, same device and dtype, this run): "
      << fixed(f->gemm_ceiling_ms, 2) << " ms; the step runs at " << fixed(100 * f->ceiling_fraction, 1) << "% of its speed\n"
      << "  memory: fixed " << fixed(gib(f->weights_bytes + f->gradients_bytes + f->optimizer_bytes), 3) << " GiB (weights "
      << fixed(gib(f->weights_bytes), 3) << ", gradients " << fixed(gib(f->gradients_bytes), 3) << ", optimizer state "
      << fixed(gib(f->optimizer_bytes), 3) << "), activations at peak " << fixed(gib(f->activation_peak_bytes), 3)
      << " GiB, scratch " << fixed(gib(f->scratch_bytes), 3) << " GiB\n"
      << "  memory by phase" << (s.dev.is_cpu() ? " (the CPU's memory is the host's: transitions only)" : " (the device's memory in use)")
      << ": training" << in_use(f->in_use_training_bytes) << "; offloaded" << in_use(f->in_use_offloaded_bytes)
      << " (optimizer state, " << fixed(gib(f->offloaded_bytes), 3) << " GiB, to " << (s.dev.is_cpu() ? "host" : "pinned host")
      << " memory in " << fixed(f->offload_ms, 1) << " ms, the first time " << fixed(f->first_offload_ms, 1)
      << " ms, " << (s.dev.is_cpu() ? "allocating" : "pinning") << " it; gradients and cached activations released); restored"
      << in_use(f->in_use_restored_bytes) << " in " << fixed(f->restore_ms, 1) << " ms; the next step's loss "
      << fixed(f->loss_after_restore, 4) << "\n";
  if (s.profile) {
    double total = 0;
    for (const auto& t : f->profile) total += t.ms;
    out << "  profile of the timed steps (per step; each op charged from its start to the next one's):\n";
    for (const auto& t : f->profile) {
      char row[256];
      std::snprintf(row, sizeof row, "    %-36s %8.1f calls %10.3f ms %6.1f%%\n", t.name.c_str(),
                    static_cast<double>(t.calls) / s.steps, t.ms / s.steps, total > 0 ? 100 * t.ms / total : 0.0);
      out << row;
    }
  }
  if (const auto it = p.values.find("--json"); it != p.values.end()) {
    nlohmann::json j = {{"model", s.model.string()}, {"device", s.dev.to_string()}, {"parameters", f->parameters},
                              {"weights_dtype", std::string(gpu::to_string(s.weights))},
                              {"tokens", s.tokens}, {"micro_batch", s.micro_batch}, {"steps", s.steps}, {"warmup", s.warmup},
                              {"recompute", gpu::to_string(s.recompute)}, {"optimizer_dtype", optimizer},
                              {"logprob_chunk", s.logprob_chunk},
                              {"step_ms_median", f->step_ms_median}, {"step_ms_mean", f->step_ms_mean},
                              {"tokens_per_s", f->tokens_per_s}, {"flops_per_step", f->flops_per_step},
                              {"model_tflops", f->model_tflops}, {"gemm_ceiling_ms", f->gemm_ceiling_ms},
                              {"ceiling_fraction", f->ceiling_fraction}, {"first_loss", f->first_loss}, {"last_loss", f->last_loss},
                              {"weights_bytes", f->weights_bytes}, {"gradients_bytes", f->gradients_bytes},
                              {"optimizer_bytes", f->optimizer_bytes}, {"activation_peak_bytes", f->activation_peak_bytes},
                              {"scratch_bytes", f->scratch_bytes}, {"in_use_training_bytes", in_use_json(f->in_use_training_bytes)},
                              {"in_use_offloaded_bytes", in_use_json(f->in_use_offloaded_bytes)},
                              {"in_use_restored_bytes", in_use_json(f->in_use_restored_bytes)}, {"offloaded_bytes", f->offloaded_bytes},
                              {"first_offload_ms", f->first_offload_ms}, {"offload_ms", f->offload_ms}, {"restore_ms", f->restore_ms},
                              {"loss_after_restore", f->loss_after_restore}};
    if (s.profile) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& t : f->profile) rows.push_back({{"name", t.name}, {"calls", t.calls}, {"ms", t.ms}});
      j["profile"] = rows;
    }
    std::ofstream file(it->second);
    file << j.dump(2) << "\n";
    file.close();
    if (!file) {
      err << "tandem bench train: --json " << it->second << ": cannot write it\n";
      return exit_refused;
    }
  }
  return exit_ok;
}

}  // namespace tandem::cli
