// A Gemma 4 text stack with seeded random weights held in a slab of any float dtype (F64 for
// finite differences), with its gradient slab, and a small packed batch to run it on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/core/slab.h"
#include "gpu/model/config.h"
#include "gpu/model/forward.h"
#include "gpu/model/layout.h"
#include "gpu/model/model_weights.h"
#include "gpu/model/slab_views.h"

namespace tandem::test {

/// The config of preset `name` (configs/models/).
inline gpu::model_config preset_model_config(const std::string& name) {
  auto c = gpu::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models" / name);
  if (!c) throw std::runtime_error(c.error().message());
  return *c;
}

struct random_model {
  gpu::model_config config;
  gpu::model_layout layout;
  gpu::slab params, grads;
  gpu::model_weights w, g;

  /// Norms and scalars in U[0.5, 1.5] (no identity hides a bug), matrices N(0, 0.25).
  random_model(gpu::model_config c, gpu::dtype type, std::uint32_t seed) : config(std::move(c)) {
    layout = gpu::build_layout(config, type);
    params = gpu::slab::create("parameters", layout.total_bytes(), gpu::device::cpu()).value();
    grads = gpu::slab::create("gradients", layout.total_bytes(), gpu::device::cpu()).value();
    std::mt19937 rng(seed);
    for (const auto& e : layout.tensors) {
      const auto v = *gpu::view_in(params, e, type);
      for (std::int64_t i = 0; i < e.elements(); ++i) {
        const double x = e.shape.size() == 1 ? std::uniform_real_distribution<double>(0.5, 1.5)(rng)
                                             : std::normal_distribution<double>(0, 0.25)(rng);
        if (type == gpu::dtype::float64) v.as<double>()[i] = x;
        else v.as<float>()[i] = static_cast<float>(x);
      }
    }
    w = *gpu::bind_weights(config, layout, params);
    g = *gpu::bind_weights(config, layout, grads);
  }
};

/// Sequences packed end to end, each next token its target, weighted by `weights`.
struct test_batch {
  gpu::host_buffer tokens, positions, cu, targets, weights;
  gpu::packed_batch view() const { return {tokens, positions, cu}; }
};

/// Sequences of the given lengths with ids in [1, vocab) (the padding row 0 gets no lookup
/// gradient) and random next-token weights in dtype `type`.
inline test_batch make_test_batch(std::int64_t vocab, const std::vector<int>& lengths, gpu::dtype type, std::uint32_t seed = 5) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> tok, pos, tgt, cu{0};
  std::vector<double> wts;
  for (int n : lengths) {
    std::vector<std::int32_t> s(static_cast<std::size_t>(n));
    for (auto& t : s) t = static_cast<std::int32_t>(1 + rng() % static_cast<std::uint32_t>(vocab - 1));
    for (int t = 0; t < n; ++t) {
      tok.push_back(s[static_cast<std::size_t>(t)]);
      pos.push_back(t);
      tgt.push_back(t + 1 < n ? s[static_cast<std::size_t>(t) + 1] : 0);
      wts.push_back(t + 1 < n ? std::uniform_real_distribution<double>(-1, 1)(rng) : 0.0);
    }
    cu.push_back(static_cast<std::int32_t>(tok.size()));
  }
  const auto T = static_cast<std::int64_t>(tok.size());
  gpu::host_buffer weights(type, {T});
  for (std::int64_t t = 0; t < T; ++t) {
    if (type == gpu::dtype::float64) weights.data<double>()[t] = wts[static_cast<std::size_t>(t)];
    else weights.data<float>()[t] = static_cast<float>(wts[static_cast<std::size_t>(t)]);
  }
  return {gpu::host_buffer::of<std::int32_t>({T}, tok), gpu::host_buffer::of<std::int32_t>({T}, pos),
          gpu::host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu),
          gpu::host_buffer::of<std::int32_t>({T}, tgt), std::move(weights)};
}

}  // namespace tandem::test
