// `tandem loss --model DIR --tokens FILE [--recompute none|selective|full] [--gradients]
// [--backend cpu|cuda] [--dtype fp32|bf16]`: the mean
// next-token cross-entropy of the sequences in FILE over every position of every sequence
// (transformers' convention for labels=input_ids), and with --gradients the gradient of that loss
// for every trainable tensor, under its Hugging Face name in DIR, row-major.
#include <nlohmann/json.hpp>

#include "gpu/core/convert.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/core/slab.h"
#include "gpu/model/backward.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/slab_views.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/compute_choice.h"
#include "tools/cli/model_resolution.h"
#include "tools/cli/token_sequences.h"

namespace tandem::cli {
namespace {

std::optional<gpu::recompute_mode> parse_recompute(const std::string& s) {
  for (auto m : {gpu::recompute_mode::none, gpu::recompute_mode::selective, gpu::recompute_mode::full})
    if (s == gpu::to_string(m)) return m;
  return std::nullopt;
}

// Hugging Face name of every layout tensor as the checkpoint stores it.
std::vector<std::string> names_in(const gpu::checkpoint& c) {
  std::vector<std::string> names(c.layout.tensors.size());
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = gpu::hf_full_name(c.config, c.layout.tensors[i]);
  if (c.files)
    for (const auto& p : c.plan.tensors)
      if (p.role == gpu::tensor_role::text) names[p.layout_index] = p.name;
  return names;
}

}  // namespace

int loss_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--model", "--tokens", "--recompute", "--backend", "--dtype"}, {"--gradients"});
  if (!p.problem.empty()) {
    err << "tandem loss: " << p.problem << "\n";
    return exit_usage;
  }
  for (const char* required : {"--model", "--tokens"}) {
    if (!p.values.count(required)) {
      err << "tandem loss: missing " << required << " (see `tandem help loss`)\n";
      return exit_usage;
    }
  }
  gpu::recompute_mode mode = gpu::recompute_mode::none;
  if (auto r = p.values.find("--recompute"); r != p.values.end()) {
    const auto m = parse_recompute(r->second);
    if (!m) {
      err << "tandem loss: --recompute '" << r->second << "': expected none, selective or full\n";
      return exit_usage;
    }
    mode = *m;
  }
  std::string problem;
  bool refused = false;
  const auto choice = parse_compute_choice(p, problem, refused);
  if (!choice) {
    err << "tandem loss: " << problem << "\n";
    return refused ? exit_refused : exit_usage;
  }
  auto c = open_model_option("loss", p.values.at("--model"), choice->type, err);
  if (!c) return exit_refused;
  const auto sequences = read_sequences(p.values.at("--tokens"), c->config.vocab_size, problem);
  if (!sequences) {
    err << "tandem loss: " << problem << "\n";
    return exit_refused;
  }
  gpu::workspace scratch(choice->dev);
  const gpu::exec_context ctx = choice->context(scratch);
  const auto packing = pack(*sequences, ctx);
  if (!packing) {
    err << "tandem loss: " << packing.error().message() << "\n";
    return exit_refused;
  }
  const packed_sequences& packed = *packing;
  if (packed.predicted == 0) {
    err << "tandem loss: " << p.values.at("--tokens") << ": no sequence has two tokens: nothing to predict\n";
    return exit_refused;
  }
  auto weights = gpu::load_checkpoint(*c, choice->dev);
  auto grads = gpu::slab::create("gradients", c->layout.total_bytes(), choice->dev);
  if (!weights || !grads) {
    err << "tandem loss: " << (!weights ? weights.error() : grads.error()).message() << "\n";
    return exit_refused;
  }
  auto w = gpu::bind_weights(c->config, c->layout, *weights);
  auto g = gpu::bind_weights(c->config, c->layout, *grads);
  if (!w || !g) {
    err << "tandem loss: " << (!w ? w.error() : g.error()).message() << "\n";
    return exit_refused;
  }
  // loss = -(1/N) Σ logprob: the weight of each predicted token is -1/N, the last tokens get 0.
  const std::int64_t T = packed.size(), N = packed.predicted;
  std::vector<float> token_weights(static_cast<std::size_t>(T), 0.0f);
  for (std::size_t s = 0; s + 1 < packed.offsets.size(); ++s)
    for (std::int32_t t = packed.offsets[s]; t + 1 < packed.offsets[s + 1]; ++t)
      token_weights[static_cast<std::size_t>(t)] = -1.0f / static_cast<float>(N);
  gpu::model_activations act;
  gpu::device_buffer dlogprobs, logprobs, hidden, d_hidden;
  gpu::status s = gpu::allocate_buffers(ctx, gpu::dtype::float32, {{&dlogprobs, {T}}, {&logprobs, {T}}});
  if (s) s = gpu::allocate_buffers(ctx, c->layout.tensors.front().type, {{&hidden, {T, c->config.hidden_size}}, {&d_hidden, {T, c->config.hidden_size}}});
  if (s) s = gpu::copy_to_device(ctx, dlogprobs.data<float>(), token_weights.data(), T * 4);
  if (s) s = gpu::forward_for_backward(ctx, c->config, *w, packed.batch(), hidden, act, mode);
  if (s) s = gpu::head_logprobs(ctx, c->config, *w, hidden, packed.targets(), {}, logprobs);
  if (s && p.flags.count("--gradients")) {
    s = gpu::head_backward(ctx, c->config, *w, hidden, packed.targets(), {}, dlogprobs, d_hidden, *g);
    if (s) s = gpu::model_backward(ctx, c->config, *w, packed.batch(), act, d_hidden, *g);
  }
  gpu::result<std::vector<float>> read = s ? logprobs.read<float>(ctx) : gpu::result<std::vector<float>>(s);
  if (!read) {
    err << "tandem loss: " << read.error().message() << "\n";
    return exit_refused;
  }
  const std::vector<float>& lp = *read;
  double loss = 0;
  for (std::size_t t = 0; t < lp.size(); ++t) loss -= static_cast<double>(token_weights[t] != 0 ? lp[t] : 0.0f);
  nlohmann::ordered_json result{{"loss", loss / static_cast<double>(N)}, {"tokens", N}};
  if (p.flags.count("--gradients")) {
    nlohmann::ordered_json grads_json = nlohmann::ordered_json::object();
    const auto names = names_in(*c);
    for (std::size_t i = 0; i < c->layout.tensors.size(); ++i) {
      const auto& e = c->layout.tensors[i];
      if (!e.trainable) continue;  // layer_scalar: a buffer, as in transformers
      // The gradient in the weights' dtype on the device, as float32 values here.
      std::vector<float> values(static_cast<std::size_t>(e.elements()));
      std::vector<std::byte> stored(static_cast<std::size_t>(e.elements()) * gpu::size_of(e.type));
      if (gpu::status r = gpu::copy_to_host(ctx, stored.data(), gpu::view_in(*grads, e, e.type)->data(), static_cast<std::int64_t>(stored.size())); !r) {
        err << "tandem loss: " << r.message() << "\n";
        return exit_refused;
      }
      gpu::convert_elements(stored.data(), e.type, values.data(), gpu::dtype::float32, e.elements());
      grads_json[names[i]] = {{"shape", e.shape}, {"data", std::move(values)}};
    }
    result["gradients"] = std::move(grads_json);
  }
  out << result.dump() << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
