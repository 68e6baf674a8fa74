// The two loops of a streamed refit (refit_stream.hpp).
#include "actors/api/refit_stream.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "actors/api/messages.hpp"

namespace tandem {
namespace {

constexpr std::uint64_t bucket_follows = 0;
constexpr std::uint64_t stream_aborted = 1;

/// The header as it travels: two uint64 {status, checksum} in four int32 words.
using header_words = std::array<std::int32_t, 4>;  // I32 [4]

header_words pack(std::uint64_t status, std::uint64_t checksum) {
  const std::uint64_t fields[2] = {status, checksum};
  header_words out{};
  std::memcpy(out.data(), fields, sizeof fields);
  return out;
}

void unpack(const header_words& words, std::uint64_t& status, std::uint64_t& checksum) {
  std::uint64_t fields[2];
  std::memcpy(fields, words.data(), sizeof fields);
  status = fields[0];
  checksum = fields[1];
}

std::size_t words_for(std::int64_t bytes) { return static_cast<std::size_t>((bytes + 3) / 4); }

/// One buffer for every bucket of a stream: as many words as the largest bucket needs.
std::vector<std::int32_t> stream_buffer(const gpu::bucket_plan& plan) {
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) largest = std::max(largest, plan.bucket_size(i));
  return std::vector<std::int32_t>(words_for(largest));
}

std::string status_text(const gpu::status& s) { return std::string(gpu::to_string(s.code())) + ": " + s.message(); }

stream_outcome failed(stream_failure why, std::size_t bucket, std::string reason, std::int64_t bytes) {
  return {why, bucket, std::move(reason), bytes};
}

}  // namespace

stream_outcome send_stream(gpu::communicator& group, const gpu::train_engine& engine, const gpu::bucket_plan& plan,
                           bool checksums) {
  const int root = group.rank();
  std::vector<std::int32_t> words = stream_buffer(plan);  // U8 [largest bucket_size], as I32 words
  std::int64_t sent = 0;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) {
    const std::int64_t size = plan.bucket_size(i);
    const std::span<std::int32_t> payload(words.data(), words_for(size));  // I32 [ceil(bucket_size(i) / 4)]
    if (!payload.empty()) payload.back() = 0;                                // padding travels as zeros
    const std::span<std::byte> bytes = std::as_writable_bytes(payload).first(static_cast<std::size_t>(size));
    if (gpu::status s = engine.export_bucket(plan, i, bytes); !s) {
      header_words header = pack(stream_aborted, 0);
      if (gpu::status t = group.broadcast(std::span<std::int32_t>(header), root); !t)
        return failed(stream_failure::transport, i, "export: " + status_text(s) + "; abort header: " + status_text(t), sent);
      return failed(stream_failure::engine, i, status_text(s), sent);
    }
    header_words header = pack(bucket_follows, checksums ? bucket_checksum(bytes) : 0);
    if (gpu::status s = group.broadcast(std::span<std::int32_t>(header), root); !s)
      return failed(stream_failure::transport, i, "header: " + status_text(s), sent);
    if (gpu::status s = group.broadcast(payload, root); !s)
      return failed(stream_failure::transport, i, "payload: " + status_text(s), sent);
    sent += size;
  }
  stream_outcome out;
  out.bytes = sent;
  return out;
}

gpu::status abort_stream(gpu::communicator& group) {
  header_words header = pack(stream_aborted, 0);
  return group.broadcast(std::span<std::int32_t>(header), group.rank());
}

stream_outcome receive_stream(gpu::communicator& group, int root, gpu::generate_engine* engine,
                              const gpu::bucket_plan& plan, bool checksums) {
  std::vector<std::int32_t> words = stream_buffer(plan);  // U8 [largest bucket_size], as I32 words
  stream_outcome out;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) {
    header_words header{};
    if (gpu::status s = group.broadcast(std::span<std::int32_t>(header), root); !s)
      return failed(stream_failure::transport, i, "header: " + status_text(s), out.bytes);
    std::uint64_t status = 0;
    std::uint64_t checksum = 0;
    unpack(header, status, checksum);
    if (status != bucket_follows) {
      if (out.ok()) out = failed(stream_failure::aborted, i, "the policy root aborted the stream", out.bytes);
      return out;
    }
    const std::int64_t size = plan.bucket_size(i);
    const std::span<std::int32_t> payload(words.data(), words_for(size));  // I32 [ceil(bucket_size(i) / 4)]
    if (gpu::status s = group.broadcast(payload, root); !s)
      return failed(stream_failure::transport, i, "payload: " + status_text(s), out.bytes);
    if (!engine || !out.ok()) continue;  // taking part only, discarding
    const std::span<const std::byte> bytes = std::as_bytes(payload).first(static_cast<std::size_t>(size));
    if (checksums && bucket_checksum(bytes) != checksum) {
      out = failed(stream_failure::corrupt, i, "checksum mismatch (corrupted in transit)", out.bytes);
      continue;
    }
    if (gpu::status s = engine->import_bucket(i, bytes); !s) {
      out = failed(stream_failure::engine, i, status_text(s), out.bytes);
      continue;
    }
    out.bytes += size;
  }
  return out;
}

}  // namespace tandem
