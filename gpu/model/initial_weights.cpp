// Gemma 4's initial weights: counter-based normals, so chunks fill in any order.
#include "gpu/model/initial_weights.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/core/convert.h"
#include "gpu/core/memory.h"
#include "gpu/model/slab_views.h"
#include "plain/splitmix64.h"

namespace tandem::gpu {
namespace {

using plain::splitmix64;

/// A standard normal at (seed, tensor, element): Box-Muller of two uniform draws in (0, 1].
double normal_at(std::uint64_t seed, std::uint64_t tensor, std::uint64_t element) {
  const std::uint64_t base = splitmix64(splitmix64(seed) ^ splitmix64(tensor + 0x51ED270B27F9E3ull)) ^ (element * 0xD1B54A32D192ED03ull);
  const double u1 = (static_cast<double>(splitmix64(base) >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(splitmix64(base ^ 0xA0761D6478BD642Full) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// Gemma 4 starts these at 1: RMSNorm scales (used directly, not as 1 + w), layer_scalar, the
/// router's scales.
bool starts_at_one(const std::string& name) {
  std::string stem = name;
  if (stem.ends_with(".weight")) stem.resize(stem.size() - 7);
  const std::string last = stem.substr(stem.rfind('.') + 1);
  return last.find("norm") != std::string::npos || last == "layer_scalar" || last == "scale" || last == "per_expert_scale";
}

}  // namespace

result<double> initializer_range(const std::string& config_json, const std::string& where) {
  double std_dev = 0.02;
  try {
    const auto j = nlohmann::json::parse(config_json);
    if (j.contains("initializer_range") && j["initializer_range"].is_number()) std_dev = j["initializer_range"].get<double>();
  } catch (const nlohmann::json::exception&) {
  }
  if (!(std::isfinite(std_dev) && std_dev > 0))
    return status(status_code::invalid_argument, where + ": initializer_range must be a positive number");
  return std_dev;
}

void initial_values(const tensor_entry& entry, std::size_t k, std::uint64_t seed, double std_dev, std::int64_t first,
                    std::span<float> out) {
  if (starts_at_one(entry.name)) {
    std::fill(out.begin(), out.end(), 1.0f);
    return;
  }
#pragma omp parallel for schedule(static) if (out.size() > 65536)
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(std_dev * normal_at(seed, k, static_cast<std::uint64_t>(first) + i));
}

status fill_initial_weights(const exec_context& ctx, const model_layout& layout, const slab& weights, std::uint64_t seed,
                            double std_dev) {
  constexpr std::int64_t piece = (std::int64_t{64} << 20) / 4;
  std::vector<float> values;
  std::vector<std::byte> stored;
  for (std::size_t k = 0; k < layout.tensors.size(); ++k) {
    const tensor_entry& e = layout.tensors[k];
    if (!is_storage_float(e.type))
      return status(status_code::invalid_argument, "fill_initial_weights: " + e.name + " is " + std::string(to_string(e.type)) +
                                                       ", not a floating-point storage type");
    auto view = view_in(weights, e, e.type);
    if (!view) return view.error();
    auto* base = static_cast<std::byte*>(view->data());
    const auto width = static_cast<std::int64_t>(size_of(e.type));
    for (std::int64_t first = 0; first < e.elements(); first += piece) {
      const std::int64_t n = std::min(piece, e.elements() - first);
      values.resize(static_cast<std::size_t>(n));
      initial_values(e, k, seed, std_dev, first, values);  // float32, then the storage's rounding
      if (ctx.dev.is_cpu()) {
        convert_elements(values.data(), dtype::float32, base + first * width, e.type, n);
        continue;
      }
      stored.resize(static_cast<std::size_t>(n * width));
      convert_elements(values.data(), dtype::float32, stored.data(), e.type, n);
      if (status s = copy_to_device(ctx, base + first * width, stored.data(), n * width); !s) return s;
    }
  }
  return status::ok();
}

}  // namespace tandem::gpu
