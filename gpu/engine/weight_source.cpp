// The colocated weight view's digest and checks (weight_source.h).
#include "gpu/engine/weight_source.h"

#include <span>
#include <string>
#include <vector>

#include "gpu/core/chunked_hash.h"
#include "gpu/core/device_hash.h"

namespace tandem::gpu {

std::uint64_t weight_source::digest() const {
  chunked_xxh3_stream h;
  for (std::size_t i = 0; i < tensors.size() && i < manifest.size(); ++i)
    h.update(std::span<const std::byte>(tensors[i], static_cast<std::size_t>(manifest[i].bytes())));
  return h.digest();
}

std::uint64_t weight_source::digest(const exec_context& ctx) const {
  if (dev.is_cpu()) return digest();
  std::vector<byte_range> ranges;
  ranges.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size() && i < manifest.size(); ++i) ranges.push_back({tensors[i], manifest[i].bytes()});
  // Hashed where they are: 8 bytes a MiB come back, not the weights (an E2B step's digest brought
  // about 9 GB through host staging before).
  if (auto h = chunked_xxh3_on(ctx, ranges)) return *h;
  // The device could not be read: the digest of nothing was read, which matches no weights; the
  // engine's next call on the device reports the failure.
  return chunked_xxh3_stream{}.digest();
}

status check_weight_source(const char* who, const weight_source& source, const weight_manifest& expected) {
  const std::string w(who);
  if (source.tensors.size() != source.manifest.size())
    return {status_code::invalid_argument, w + ": the shared weights give " + std::to_string(source.tensors.size()) +
                                               " addresses for " + std::to_string(source.manifest.size()) + " tensors"};
  for (std::size_t i = 0; i < source.tensors.size(); ++i)
    if (!source.tensors[i])
      return {status_code::invalid_argument, w + ": the shared weights have no address for " + source.manifest[i].name};
  if (status s = check_manifest(expected, source.manifest); !s)
    return {s.code(), w + ": the shared weights are not this engine's model: " + s.message()};
  return status::ok();
}

}  // namespace tandem::gpu
