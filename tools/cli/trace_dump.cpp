// The forward's named activations, kept on the host and written as safetensors (trace_dump.h).
#include "tools/cli/trace_dump.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "gpu/core/convert.h"
#include "gpu/core/staged_copy.h"
#include "gpu/model/safetensors_writer.h"

namespace tandem::cli {

void trace_dump::record(std::string_view name, int layer, const gpu::tensor& value) {
  if (!first_error_) return;
  std::string key = layer < 0 ? std::string(name) : "layers." + std::to_string(layer) + "." + std::string(name);
  const auto taken = [&](const std::string& k) {
    return std::any_of(kept_.begin(), kept_.end(), [&](const kept& e) { return e.key == k; });
  };
  if (taken(key)) {  // named twice in one forward: the later ones numbered
    int n = 2;
    while (taken(key + "#" + std::to_string(n))) ++n;
    key += "#" + std::to_string(n);
  }
  if (!value.is_contiguous() || !gpu::is_storage_float(value.type())) {
    first_error_ = {gpu::status_code::unsupported, "trace: " + key + " (" + std::string(gpu::to_string(value.type())) +
                                                       ") is not a contiguous float32, bfloat16 or float16 tensor"};
    return;
  }
  kept k{key, {}, std::vector<float>(static_cast<std::size_t>(value.numel()))};
  for (int d = 0; d < value.rank(); ++d) k.shape.push_back(value.dim(d));
  std::vector<std::byte> raw;
  raw.reserve(static_cast<std::size_t>(value.bytes()));
  const gpu::status read = gpu::read_from_device(ctx_, value.data(), value.bytes(),
                                                 [&raw](std::span<const std::byte> b) { raw.insert(raw.end(), b.begin(), b.end()); });
  if (!read) {
    first_error_ = {read.code(), "trace: reading " + key + ": " + read.message()};
    return;
  }
  gpu::convert_elements(raw.data(), value.type(), k.values.data(), gpu::dtype::float32, value.numel());
  kept_.push_back(std::move(k));
}

gpu::status trace_dump::write(const std::filesystem::path& path) const {
  if (!first_error_) return first_error_;
  std::vector<gpu::st_write_item> items;
  for (const kept& k : kept_)
    items.push_back({k.key, gpu::st_dtype::f32, k.shape, [&k](std::int64_t at, std::span<std::byte> out) {
                       std::memcpy(out.data(), reinterpret_cast<const std::byte*>(k.values.data()) + at, out.size());
                       return gpu::status::ok();
                     }});
  return gpu::write_st_file(path, items, {{"format", "tandem trace"}});
}

}  // namespace tandem::cli
