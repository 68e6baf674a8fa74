// `tandem logprobs --model DIR --tokens FILE [--temperature T] [--top-k K] [--top-p P]
// [--backend cpu|cuda] [--dtype fp32|bf16] [--trace OUT]`: the per-token logprobs of given
// sequences under the model, for anyone to check parity with another implementation, or the
// GPU's with the CPU's. FILE is a JSON array of token-id arrays; stdout gets a JSON array with one
// array per sequence, entry t the logprob of token t+1 given tokens 0..t (null where top-k or
// top-p masks the token out). --trace writes every named activation to OUT (trace_dump.h).
#include <cmath>
#include <filesystem>
#include <optional>
#include <nlohmann/json.hpp>

#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/forward.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/compute_choice.h"
#include "tools/cli/model_resolution.h"
#include "tools/cli/token_sequences.h"
#include "tools/cli/trace_dump.h"

namespace tandem::cli {

int logprobs_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p =
      parse_options(a, {"--model", "--tokens", "--temperature", "--top-k", "--top-p", "--backend", "--dtype", "--trace"}, {});
  if (!p.problem.empty()) {
    err << "tandem logprobs: " << p.problem << "\n";
    return exit_usage;
  }
  for (const char* required : {"--model", "--tokens"}) {
    if (!p.values.count(required)) {
      err << "tandem logprobs: missing " << required << " (see `tandem help logprobs`)\n";
      return exit_usage;
    }
  }
  std::string problem;
  gpu::ops::sampling_params params;
  if (auto t = number_option<double>(p, "--temperature", problem)) params.temperature = *t;
  if (auto k = number_option<std::int32_t>(p, "--top-k", problem)) params.top_k = *k;
  if (auto q = number_option<double>(p, "--top-p", problem)) params.top_p = *q;
  if (!problem.empty()) {
    err << "tandem logprobs: " << problem << "\n";
    return exit_usage;
  }
  if (gpu::status s = gpu::ops::check_sampling_params("tandem logprobs", params, false); !s) {
    err << s.message() << "\n";
    return exit_usage;
  }
  bool refused = false;
  const auto choice = parse_compute_choice(p, problem, refused);
  if (!choice) {
    err << "tandem logprobs: " << problem << "\n";
    return refused ? exit_refused : exit_usage;
  }
  std::optional<std::filesystem::path> trace_path;
  if (const auto it = p.values.find("--trace"); it != p.values.end()) {
    trace_path = it->second;
    std::error_code ec;
    if (std::filesystem::exists(*trace_path, ec) || ec) {
      err << "tandem logprobs: --trace " << it->second << ": the file exists (it is never overwritten)\n";
      return exit_refused;
    }
  }
  auto c = open_model_option("logprobs", p.values.at("--model"), choice->type, err);
  if (!c) return exit_refused;
  const auto sequences = read_sequences(p.values.at("--tokens"), c->config.vocab_size, problem);
  if (!sequences) {
    err << "tandem logprobs: " << problem << "\n";
    return exit_refused;
  }
  gpu::workspace scratch(choice->dev);
  const gpu::exec_context ctx = choice->context(scratch);
  auto weights = gpu::load_checkpoint(*c, choice->dev);
  if (!weights) {
    err << "tandem logprobs: " << weights.error().message() << "\n";
    return exit_refused;
  }
  auto bound = gpu::bind_weights(c->config, c->layout, *weights);
  if (!bound) {
    err << "tandem logprobs: " << bound.error().message() << "\n";
    return exit_refused;
  }
  const auto packing = pack(*sequences, ctx);
  if (!packing) {
    err << "tandem logprobs: " << packing.error().message() << "\n";
    return exit_refused;
  }
  const packed_sequences& packed = *packing;
  gpu::device_buffer logprobs;
  trace_dump dump(ctx);
  gpu::status s = gpu::allocate_buffers(ctx, gpu::dtype::float32, {{&logprobs, {packed.size()}}});
  if (s)
    s = gpu::forward_logprobs(ctx, c->config, *bound, packed.batch(), packed.targets(), params, logprobs, 256,
                              trace_path ? gpu::tracer(&dump) : gpu::tracer());
  if (s && trace_path) s = dump.write(*trace_path);
  gpu::result<std::vector<float>> read = s ? logprobs.read<float>(ctx) : gpu::result<std::vector<float>>(s);
  if (!read) {
    err << "tandem logprobs: " << read.error().message() << "\n";
    return exit_refused;
  }
  const std::vector<float>& lp = *read;
  nlohmann::json result = nlohmann::json::array();
  const auto& cu = packed.offsets;
  for (std::size_t s = 0; s + 1 < cu.size(); ++s) {
    nlohmann::json row = nlohmann::json::array();
    for (std::int32_t t = cu[s]; t + 1 < cu[s + 1]; ++t) {
      const float v = lp[static_cast<std::size_t>(t)];
      if (std::isfinite(v)) row.push_back(static_cast<double>(v));
      else row.push_back(nullptr);
    }
    result.push_back(std::move(row));
  }
  out << result.dump() << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
