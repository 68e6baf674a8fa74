// Staged copies: a host buffer of at most 64 MiB between the conversion and the device.
#include "gpu/core/staged_copy.h"

#include <algorithm>
#include <vector>

#include "gpu/core/convert.h"
#include "gpu/core/memory.h"
#include "gpu/core/op_profile.h"

namespace tandem::gpu {
namespace {

constexpr std::int64_t staging_bytes = std::int64_t{64} << 20;

std::int64_t elements_per_piece(dtype a, dtype b) {
  return staging_bytes / static_cast<std::int64_t>(std::max(size_of(a), size_of(b)));
}

const std::byte* at(const void* p, std::int64_t element, dtype t) {
  return static_cast<const std::byte*>(p) + element * static_cast<std::int64_t>(size_of(t));
}
std::byte* at(void* p, std::int64_t element, dtype t) {
  return static_cast<std::byte*>(p) + element * static_cast<std::int64_t>(size_of(t));
}

}  // namespace

status convert_to_device(const exec_context& ctx, const void* src, dtype from, void* dst, dtype to, std::int64_t count) {
  if (ctx.dev.is_cpu()) {
    convert_elements(src, from, dst, to, count);
    return status::ok();
  }
  const std::int64_t piece = elements_per_piece(from, to);
  std::vector<std::byte> staging(static_cast<std::size_t>(std::min(count, piece)) * size_of(to));
  for (std::int64_t k = 0; k < count; k += piece) {
    const std::int64_t n = std::min(piece, count - k);
    convert_elements(at(src, k, from), from, staging.data(), to, n);
    if (status s = copy_to_device(ctx, at(dst, k, to), staging.data(), n * static_cast<std::int64_t>(size_of(to))); !s) return s;
  }
  return status::ok();
}

status convert_on_device(const exec_context& ctx, const void* src, dtype from, void* dst, dtype to, std::int64_t count) {
  op_profile_mark(ctx, "(dtype conversion)");
  if (ctx.dev.is_cpu()) {
    convert_elements(src, from, dst, to, count);
    return status::ok();
  }
  const std::int64_t piece = elements_per_piece(from, to);
  const auto held = static_cast<std::size_t>(std::min(count, piece));
  std::vector<std::byte> in(held * size_of(from)), out(held * size_of(to));
  for (std::int64_t k = 0; k < count; k += piece) {
    const std::int64_t n = std::min(piece, count - k);
    if (status s = copy_to_host(ctx, in.data(), at(src, k, from), n * static_cast<std::int64_t>(size_of(from))); !s) return s;
    convert_elements(in.data(), from, out.data(), to, n);
    if (status s = copy_to_device(ctx, at(dst, k, to), out.data(), n * static_cast<std::int64_t>(size_of(to))); !s) return s;
  }
  return status::ok();
}

status read_from_device(const exec_context& ctx, const void* src, std::int64_t bytes,
                        const std::function<void(std::span<const std::byte>)>& sink) {
  const auto* from = static_cast<const std::byte*>(src);
  if (ctx.dev.is_cpu()) {
    if (bytes > 0) sink({from, static_cast<std::size_t>(bytes)});
    return status::ok();
  }
  std::vector<std::byte> staging(static_cast<std::size_t>(std::min(bytes, staging_bytes)));
  for (std::int64_t k = 0; k < bytes; k += staging_bytes) {
    const std::int64_t n = std::min(staging_bytes, bytes - k);
    if (status s = copy_to_host(ctx, staging.data(), from + k, n); !s) return s;
    sink({staging.data(), static_cast<std::size_t>(n)});
  }
  return status::ok();
}

}  // namespace tandem::gpu
