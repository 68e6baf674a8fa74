// Encoding, decoding and checking of data-plane message headers (layout in zmq_wire.h).
#include "gpu/comm/zmq_wire.h"

#include <cstdio>

namespace tandem::gpu::zmq_wire {
namespace {

template <class U>
void put(std::byte* out, std::size_t offset, U v) {
  for (std::size_t i = 0; i < sizeof(U); ++i) out[offset + i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
}

template <class U>
U get(const std::byte* in, std::size_t offset) {
  U v = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) v |= static_cast<U>(static_cast<U>(in[offset + i]) << (8 * i));
  return v;
}

bool known_kind(std::uint16_t k) {
  switch (static_cast<wire_kind>(k)) {
    case wire_kind::hello:
    case wire_kind::bye:
    case wire_kind::abort:
    case wire_kind::waiting:
    case wire_kind::broadcast:
    case wire_kind::all_reduce:
    case wire_kind::all_gather:
    case wire_kind::reduce_scatter: return true;
  }
  return false;
}

/// "1000 float32 elements" plus the parameter the collective has ("root 2", "op max").
std::string call_text(const wire_header& h) {
  const auto t = dtype_from_code(h.dtype_code);
  std::string s = std::to_string(h.count) + " " + (t ? std::string(to_string(*t)) : std::string("untyped")) + " elements";
  if (h.kind == wire_kind::broadcast) s += " with root " + std::to_string(h.param);
  if (h.kind == wire_kind::all_reduce) s += h.param == 0 ? " with op sum" : " with op max";
  return s;
}

std::string collective(const wire_header& h) { return std::string(to_string(h.kind)) + " #" + std::to_string(h.seq); }

}  // namespace

const char* to_string(wire_kind k) {
  switch (k) {
    case wire_kind::hello: return "hello";
    case wire_kind::bye: return "bye";
    case wire_kind::abort: return "abort";
    case wire_kind::waiting: return "waiting";
    case wire_kind::broadcast: return "broadcast";
    case wire_kind::all_reduce: return "all_reduce";
    case wire_kind::all_gather: return "all_gather";
    case wire_kind::reduce_scatter: return "reduce_scatter";
  }
  return "unknown";
}

std::uint8_t dtype_code(dtype t) {
  switch (t) {
    case dtype::float32: return 1;
    case dtype::bfloat16: return 2;
    case dtype::float16: return 3;
    case dtype::float64: return 4;
    case dtype::int32: return 5;
    case dtype::uint8: return 6;
  }
  return 0;
}

std::optional<dtype> dtype_from_code(std::uint8_t code) {
  switch (code) {
    case 1: return dtype::float32;
    case 2: return dtype::bfloat16;
    case 3: return dtype::float16;
    case 4: return dtype::float64;
    case 5: return dtype::int32;
    case 6: return dtype::uint8;
    default: return std::nullopt;
  }
}

void encode_header(const wire_header& h, std::byte* out) {
  put<std::uint32_t>(out, 0, wire_magic);
  put<std::uint16_t>(out, 4, wire_version);
  put<std::uint16_t>(out, 6, static_cast<std::uint16_t>(h.kind));
  put<std::uint64_t>(out, 8, h.group_tag);
  put<std::uint32_t>(out, 16, h.sender);
  put<std::uint32_t>(out, 20, h.param);
  put<std::uint64_t>(out, 24, h.seq);
  put<std::uint32_t>(out, 32, h.index);
  put<std::uint8_t>(out, 36, h.dtype_code);
  put<std::uint8_t>(out, 37, 0);
  put<std::uint16_t>(out, 38, 0);
  put<std::uint64_t>(out, 40, h.count);
  put<std::uint64_t>(out, 48, h.payload_bytes);
}

result<wire_header> decode_header(const std::byte* frame, std::size_t size) {
  if (size < header_bytes)
    return status{status_code::io_error, "frame of " + std::to_string(size) + " bytes is shorter than the " +
                                             std::to_string(header_bytes) + "-byte header"};
  if (const auto magic = get<std::uint32_t>(frame, 0); magic != wire_magic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", magic);
    return status{status_code::io_error, std::string("frame does not start with the data-plane magic (got 0x") + hex + ")"};
  }
  if (const auto v = get<std::uint16_t>(frame, 4); v != wire_version)
    return status{status_code::io_error,
                  "frame has wire version " + std::to_string(v) + ", this build speaks " + std::to_string(wire_version)};
  const auto kind = get<std::uint16_t>(frame, 6);
  if (!known_kind(kind)) return status{status_code::io_error, "frame has unknown kind " + std::to_string(kind)};
  if (get<std::uint8_t>(frame, 37) != 0 || get<std::uint16_t>(frame, 38) != 0)
    return status{status_code::io_error, "frame has non-zero reserved header bytes"};
  wire_header h;
  h.kind = static_cast<wire_kind>(kind);
  h.group_tag = get<std::uint64_t>(frame, 8);
  h.sender = get<std::uint32_t>(frame, 16);
  h.param = get<std::uint32_t>(frame, 20);
  h.seq = get<std::uint64_t>(frame, 24);
  h.index = get<std::uint32_t>(frame, 32);
  h.dtype_code = get<std::uint8_t>(frame, 36);
  h.count = get<std::uint64_t>(frame, 40);
  h.payload_bytes = get<std::uint64_t>(frame, 48);
  if (h.dtype_code != 0 && !dtype_from_code(h.dtype_code))
    return status{status_code::io_error, "frame has unknown dtype code " + std::to_string(h.dtype_code)};
  if (h.payload_bytes != size - header_bytes)
    return status{status_code::io_error, "frame header announces " + std::to_string(h.payload_bytes) + " payload bytes, the frame carries " +
                                             std::to_string(size - header_bytes)};
  return h;
}

std::string routing_id(std::uint32_t rank) { return "r" + std::to_string(rank); }

std::optional<std::uint32_t> rank_of_routing_id(const std::string& id) {
  if (id.size() < 2 || id.size() > 11 || id[0] != 'r' || (id[1] == '0' && id.size() > 2)) return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = 1; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(id[i] - '0');
  }
  if (v > 0xffffffffu) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}

std::string describe(const wire_header& h) {
  std::string s = collective(h);
  if (is_data(h.kind)) s += " message " + std::to_string(h.index);
  s += " from rank " + std::to_string(h.sender);
  if (is_data(h.kind)) s += " (" + call_text(h) + ")";
  return s;
}

status check_expected(const wire_header& got, const wire_header& want) {
  const std::string peer = "rank " + std::to_string(got.sender);
  if (got.seq != want.seq) {
    const char* why = got.seq < want.seq ? "stale message refused: " : "message from a later collective refused: ";
    return {status_code::io_error, why + peer + " sent " + collective(got) + " message " + std::to_string(got.index) +
                                       ", this rank expects " + collective(want) + " message " + std::to_string(want.index)};
  }
  if (got.kind != want.kind)
    return {status_code::invalid_argument, peer + " called " + to_string(got.kind) + " as collective #" + std::to_string(got.seq) +
                                               ", this rank " + to_string(want.kind) +
                                               ": every rank must call the same collectives in the same order"};
  if (got.dtype_code != want.dtype_code || got.count != want.count || got.param != want.param)
    return {status_code::invalid_argument,
            peer + " passed " + call_text(got) + ", this rank " + call_text(want)};
  if (got.index != want.index)
    return {status_code::io_error, peer + " sent message " + std::to_string(got.index) +
                                       ", this rank expects message " + std::to_string(want.index)};
  if (got.payload_bytes != want.payload_bytes)
    return {status_code::io_error, peer + " sent " + std::to_string(got.payload_bytes) +
                                       " payload bytes in message " + std::to_string(got.index) + ", this rank expects " +
                                       std::to_string(want.payload_bytes) + " (do the ranks agree on chunk_bytes?)"};
  return status::ok();
}

}  // namespace tandem::gpu::zmq_wire
