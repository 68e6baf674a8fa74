// The wire format of the ZeroMQ data plane (zmq_group): every message is one frame, a fixed
// 56-byte little-endian header followed by the payload. The header names the group, the sender,
// the collective (kind and sequence number) and the message's place in it, so a stale,
// mismatched or foreign message is refused with a message naming both sides instead of being
// mixed into a result (or, when a stranger may have sent it to an insecure group, dropped:
// zmq_group.h). Plain bytes, no ZeroMQ: tests build and inspect messages with it.
//
//   offset size field
//        0    4 magic          "TZDP" (0x50445a54)
//        4    2 version        wire_version
//        6    2 kind           wire_kind
//        8    8 group_tag      zmq_group_options::group_tag of the sender
//       16    4 sender         rank of the sender
//       20    4 param          broadcast: root; all_reduce: reduce_op; waiting: rank awaited;
//                              hello: group size
//       24    8 seq            collective number (1, 2, ...; 0 = the handshake); bye: the last
//                              collective the sender completed
//       32    4 index          the message's index within the collective on this link (0, 1, ...)
//       36    1 dtype          element type code (0 for control messages)
//       37    3 reserved       zero
//       40    8 count          elements the sender passed (per rank where the API says so);
//                              hello: chunk_bytes
//       48    8 payload_bytes  bytes after the header
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "gpu/core/dtype.h"
#include "gpu/core/status.h"

namespace tandem::gpu::zmq_wire {

inline constexpr std::uint32_t wire_magic = 0x50445a54u;  // "TZDP" read little-endian
inline constexpr std::uint16_t wire_version = 1;
inline constexpr std::size_t header_bytes = 56;

/// What a message is. Control kinds (< broadcast) may arrive from any peer at any time; data
/// kinds carry one chunk of a collective from the ring predecessor.
enum class wire_kind : std::uint16_t {
  hello = 1,            ///< create(): every rank to every peer; param = size, count = chunk_bytes
  bye = 2,              ///< the sender's group was destroyed after collective `seq`
  abort = 3,            ///< the sender's collective `seq` failed; payload = the reason (text)
  waiting = 4,          ///< the sender is blocked in collective `seq` on rank `param`
  broadcast = 10,       ///< a chunk of a broadcast (param = root)
  all_reduce = 11,      ///< a chunk of an all_reduce (param = reduce_op)
  all_gather = 12,      ///< a chunk of an all_gather
  reduce_scatter = 13,  ///< a chunk of a reduce_scatter
};

/// True for the kinds that carry collective data.
constexpr bool is_data(wire_kind k) { return static_cast<std::uint16_t>(k) >= static_cast<std::uint16_t>(wire_kind::broadcast); }

/// "hello", "all_reduce", ...
const char* to_string(wire_kind k);

struct wire_header {
  wire_kind kind = wire_kind::hello;
  std::uint64_t group_tag = 0;
  std::uint32_t sender = 0;
  std::uint32_t param = 0;
  std::uint64_t seq = 0;
  std::uint32_t index = 0;
  std::uint8_t dtype_code = 0;  ///< dtype_code(dtype) or 0
  std::uint64_t count = 0;
  std::uint64_t payload_bytes = 0;
};

/// Stable wire code of an element type (1..6: float32, bfloat16, float16, float64, int32, uint8);
/// dtype_from_code inverts it.
std::uint8_t dtype_code(dtype t);
std::optional<dtype> dtype_from_code(std::uint8_t code);

/// Writes the 56 header bytes to `out`.
void encode_header(const wire_header& h, std::byte* out);

/// Parses one frame of `size` bytes: refuses a short frame, a wrong magic or version, an unknown
/// kind or dtype code, non-zero reserved bytes and a payload size other than the frame's rest.
result<wire_header> decode_header(const std::byte* frame, std::size_t size);

/// The ZeroMQ routing id a rank's sending sockets carry in an insecure group ("r3"; a secure
/// group knows its peers by their keys); rank_of_routing_id inverts it.
std::string routing_id(std::uint32_t rank);
std::optional<std::uint32_t> rank_of_routing_id(const std::string& id);

/// "all_reduce #5 message 3 from rank 1 (1000 float32 elements, param 0)".
std::string describe(const wire_header& h);

/// ok when `got` is the message `want` describes (kind, seq, index, dtype, count, param and
/// payload size; sender and tag are checked by the receiver); otherwise a status naming the
/// sender and both sides: wrong sequence numbers are io_error (a stale or early message), other
/// differences invalid_argument (the ranks called the collective differently).
status check_expected(const wire_header& got, const wire_header& want);

}  // namespace tandem::gpu::zmq_wire
