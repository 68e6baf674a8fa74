// The two loops of a streamed refit (protocol in refit_stream.hpp).
#include "actors/api/refit_stream.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "actors/api/messages.hpp"

namespace tandem {
namespace {

constexpr std::uint64_t buckets_follow = 0;
constexpr std::uint64_t stream_refused = 1;
constexpr std::uint64_t every_bucket_exported = 0;
constexpr std::uint64_t export_failed = 1;

using opening_bytes = std::array<std::byte, stream_opening_bytes>;  // U8 [24]

void put(std::span<std::byte> out, std::size_t word, std::uint64_t v) {
  std::memcpy(out.data() + word * sizeof v, &v, sizeof v);
}

std::uint64_t get(std::span<const std::byte> in, std::size_t word) {
  std::uint64_t v = 0;
  std::memcpy(&v, in.data() + word * sizeof v, sizeof v);
  return v;
}

opening_bytes opening(std::uint64_t status, std::size_t bucket_count) {
  opening_bytes out{};
  put(out, 0, stream_magic);
  put(out, 1, status);
  put(out, 2, bucket_count);
  return out;
}

/// The closing: U8 [16 (+ 8 * count)], its words {status, failed, checksum[count]}.
std::vector<std::byte> closing_buffer(std::size_t bucket_count, bool checksums) {
  return std::vector<std::byte>((2 + (checksums ? bucket_count : 0)) * sizeof(std::uint64_t));
}

/// One buffer for every bucket of a stream: as many bytes as the largest bucket.
std::vector<std::byte> stream_buffer(const gpu::bucket_plan& plan) {
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) largest = std::max(largest, plan.bucket_size(i));
  return std::vector<std::byte>(static_cast<std::size_t>(largest));
}

std::span<std::byte> bucket_bytes(std::vector<std::byte>& buffer, const gpu::bucket_plan& plan, std::size_t i) {
  return std::span<std::byte>(buffer).first(static_cast<std::size_t>(plan.bucket_size(i)));  // U8 [bucket_size(i)]
}

std::string status_text(const gpu::status& s) { return std::string(gpu::to_string(s.code())) + ": " + s.message(); }

/// Records the failure of `out` (callers keep the first failing bucket's, or end on a transport failure).
void fail(stream_outcome& out, stream_failure why, std::optional<std::size_t> bucket, std::string reason) {
  out.failure = why;
  out.bucket = bucket;
  out.reason = std::move(reason);
}

}  // namespace

std::optional<stream_opening> read_stream_opening(std::span<const std::byte> bytes) {
  if (bytes.size() != stream_opening_bytes || get(bytes, 0) != stream_magic) return std::nullopt;
  const std::uint64_t status = get(bytes, 1);
  if (status != buckets_follow && status != stream_refused) return std::nullopt;
  return stream_opening{status == stream_refused, static_cast<std::size_t>(get(bytes, 2))};
}

stream_outcome send_stream(gpu::communicator& group, const gpu::train_engine& engine, const gpu::bucket_plan& plan,
                           bool checksums) {
  const int root = group.rank();
  const std::size_t count = plan.bucket_count();
  stream_outcome out;
  opening_bytes head = opening(buckets_follow, count);
  if (gpu::status s = group.broadcast(std::span<std::byte>(head), root); !s) {
    fail(out, stream_failure::transport, std::nullopt, "opening: " + status_text(s));
    return out;
  }
  std::vector<std::byte> buffer = stream_buffer(plan);
  std::vector<std::uint64_t> sums(count, 0);
  for (std::size_t i = 0; i < count; ++i) {
    const std::span<std::byte> bytes = bucket_bytes(buffer, plan, i);
    if (out.ok()) {
      if (gpu::status s = engine.export_bucket(plan, i, bytes); !s) {
        fail(out, stream_failure::engine, i, status_text(s));
      } else if (checksums) {
        sums[i] = bucket_checksum(bytes);
      }
    }
    if (!out.ok()) std::fill(bytes.begin(), bytes.end(), std::byte{0});  // the schedule goes on, without weights
    if (gpu::status s = group.broadcast(bytes, root); !s) {
      const std::string before = out.ok() ? std::string() : "export: " + out.reason + "; ";
      fail(out, stream_failure::transport, i, before + "payload: " + status_text(s));
      return out;
    }
    if (out.ok()) out.bytes += plan.bucket_size(i);
  }
  std::vector<std::byte> tail = closing_buffer(count, checksums);
  put(tail, 0, out.ok() ? every_bucket_exported : export_failed);
  put(tail, 1, out.ok() ? 0 : static_cast<std::uint64_t>(*out.bucket));
  if (checksums)
    for (std::size_t i = 0; i < count; ++i) put(tail, 2 + i, sums[i]);
  if (gpu::status s = group.broadcast(std::span<std::byte>(tail), root); !s) {
    const std::string before = out.ok() ? std::string() : "export of bucket " + std::to_string(*out.bucket) + ": " + out.reason + "; ";
    fail(out, stream_failure::transport, std::nullopt, before + "closing: " + status_text(s));
  }
  return out;
}

gpu::status refuse_stream(gpu::communicator& group) {
  opening_bytes head = opening(stream_refused, 0);
  return group.broadcast(std::span<std::byte>(head), group.rank());
}

stream_outcome receive_stream(gpu::communicator& group, int root, gpu::generate_engine* engine,
                              const gpu::bucket_plan& plan, bool checksums) {
  const std::size_t count = plan.bucket_count();
  stream_outcome out;
  opening_bytes head{};
  if (gpu::status s = group.broadcast(std::span<std::byte>(head), root); !s) {
    fail(out, stream_failure::transport, std::nullopt, "opening: " + status_text(s));
    return out;
  }
  const std::optional<stream_opening> o = read_stream_opening(head);
  if (!o) {
    fail(out, stream_failure::transport, std::nullopt, "opening: the root's broadcast is no stream opening (the group is out of step)");
    return out;
  }
  if (o->refused) {
    fail(out, stream_failure::aborted, std::nullopt, "the policy root refused the stream");
    return out;
  }
  if (o->bucket_count != count) {
    fail(out, stream_failure::transport, std::nullopt,
         "opening: the root streams " + std::to_string(o->bucket_count) + " buckets, this rank's plan cuts " +
             std::to_string(count) + " (the group is out of step)");
    return out;
  }
  std::vector<std::byte> buffer = stream_buffer(plan);
  std::vector<std::uint64_t> sums;  // of the buckets imported so far (checksums on)
  for (std::size_t i = 0; i < count; ++i) {
    const std::span<std::byte> bytes = bucket_bytes(buffer, plan, i);
    if (gpu::status s = group.broadcast(bytes, root); !s) {
      fail(out, stream_failure::transport, i, "payload: " + status_text(s));
      return out;
    }
    if (!engine || !out.ok()) continue;  // taking part only, discarding
    if (checksums) sums.push_back(bucket_checksum(bytes));
    if (gpu::status s = engine->import_bucket(i, bytes); !s) {
      fail(out, stream_failure::engine, i, status_text(s));
      continue;
    }
    out.bytes += plan.bucket_size(i);
  }
  std::vector<std::byte> tail = closing_buffer(count, checksums);
  if (gpu::status s = group.broadcast(std::span<std::byte>(tail), root); !s) {
    fail(out, stream_failure::transport, std::nullopt, "closing: " + status_text(s));
    return out;
  }
  if (!engine) return out;
  const bool root_failed = get(tail, 0) != every_bucket_exported;
  const std::size_t root_failed_at = root_failed ? static_cast<std::size_t>(get(tail, 1)) : count;
  if (checksums) {  // the root's sums are 0 from its failed export on: compare only before it
    for (std::size_t i = 0; i < sums.size() && i < root_failed_at; ++i) {
      if (sums[i] == get(tail, 2 + i)) {
        ++out.checksums_matched;
        continue;
      }
      out.checksum_mismatch = i;
      if (out.ok() || i <= *out.bucket) fail(out, stream_failure::corrupt, i, "checksum mismatch (corrupted in transit)");
      break;
    }
  }
  if (root_failed && (out.ok() || root_failed_at < *out.bucket))
    fail(out, stream_failure::aborted, root_failed_at,
         "the policy root aborted the stream (its export of bucket " + std::to_string(root_failed_at) + " failed)");
  return out;
}

}  // namespace tandem
