// The fake model's manifest, initial weights, hash and per-token logprob.
#include "gpu/engine/fake/fake_weights.h"

#include <cmath>
#include <string>

namespace tandem::gpu {
namespace {

status refuse(const std::string& what) { return {status_code::invalid_argument, "fake model: " + what}; }

/// A uniform value in [-1, 1) from the top 24 bits of x.
float signed_unit(std::uint64_t x) { return static_cast<float>(x >> 40) * 0x1.0p-23f - 1.0f; }

}  // namespace

status check_fake_model_options(const fake_model_options& o) {
  if (o.tensors < 1) return refuse("tensors must be >= 1, got " + std::to_string(o.tensors));
  if (o.weight_bytes <= 0 || o.weight_bytes % 4 != 0)
    return refuse("weight_bytes must be a positive multiple of 4, got " + std::to_string(o.weight_bytes));
  if (o.weight_bytes < 4 * o.tensors)
    return refuse("weight_bytes must hold at least one float per tensor (" + std::to_string(4 * o.tensors) +
                  " bytes), got " + std::to_string(o.weight_bytes));
  if (o.vocab < 2) return refuse("vocab must be >= 2, got " + std::to_string(o.vocab));
  if (o.max_sequence_length < 2)
    return refuse("max_sequence_length must be >= 2, got " + std::to_string(o.max_sequence_length));
  return status::ok();
}

fake_model_options normalized(fake_model_options o) {
  if (o.tensors < 1) o.tensors = 1;
  o.weight_bytes -= o.weight_bytes % 4;
  if (o.weight_bytes < 4 * o.tensors) o.weight_bytes = 4 * o.tensors;
  if (o.vocab < 2) o.vocab = 2;
  if (o.max_sequence_length < 2) o.max_sequence_length = 2;
  return o;
}

weight_manifest fake_manifest(const fake_model_options& options) {
  const fake_model_options o = normalized(options);
  const std::int64_t floats = o.weight_bytes / 4;
  const std::int64_t each = floats / o.tensors;
  weight_manifest m;
  m.reserve(static_cast<std::size_t>(o.tensors));
  for (std::int64_t t = 0; t < o.tensors; ++t) {
    const std::int64_t n = t + 1 < o.tensors ? each : floats - each * (o.tensors - 1);
    m.push_back({"model.layers." + std::to_string(t) + ".fake.weight", {n}, dtype::float32});
  }
  return m;
}

void fill_fake_weights(const fake_model_options& options, std::span<float> out) {
  const std::uint64_t base = fake_mix64(options.seed ^ 0x66616b6577656967ull /* "fakeweig" */);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = signed_unit(fake_mix64(base + i));
}

std::uint64_t fake_mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float fake_token_logprob(std::uint64_t weight_hash, std::int32_t token, std::int64_t position, std::int32_t vocab) {
  const std::uint64_t h = fake_mix64(weight_hash ^ fake_mix64(static_cast<std::uint64_t>(position) * 0x100000001ull +
                                                              static_cast<std::uint32_t>(token)));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return static_cast<float>(-(std::log(static_cast<double>(vocab)) + 0.5 * u));
}

}  // namespace tandem::gpu
