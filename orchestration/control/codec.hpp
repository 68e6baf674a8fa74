// The one wire format of the control plane: encode a message (messages.hpp) into one ZeroMQ frame
// and decode a frame back, refusing anything malformed with a reason and a byte offset.
//
// Wire format, protocol version 7. One frame per message; the ROUTER socket's routing-id frame is
// added and removed by the socket layer, never by the codec.
//
//   offset  size  field
//   0       4     magic 0x4D444E54 (the bytes "TNDM")
//   4       2     protocol version (messages.hpp protocol_version)
//   6       2     kind (message_kind code, 1 .. kind_count)
//   8       4     body length in bytes (the frame's size minus 12)
//   12      n     body: the kind's struct, field by field in declaration order
//
// Body encoding, all integers little-endian:
//   integers (int32, uint64, ...)      their width, two's complement
//   bool                               1 byte, 0 or 1 (any other value is refused)
//   enums (finish_reason, ...)         their underlying width; values outside the enum are refused
//   float / double                     the IEEE-754 binary32 / binary64 bits as uint32 / uint64
//   string, byte array                 uint32 length, then that many bytes
//   vector                             uint32 count, then the items
//   nested struct                      its fields in declaration order, no framing of its own
//
// Every encoding is canonical: a frame that decodes re-encodes to the same bytes.
//
// Decoding is total: any byte sequence gives either a message or a codec_error naming what is
// wrong and at which byte ("truncated body: string hello.hostname at byte 37 needs 12 bytes, 4
// left"). Every declared length and count is checked against the bytes left before anything is
// allocated, so a frame never makes the decoder allocate more than a small multiple of its size
// (the ratio of a struct's in-memory size to its smallest encoding, below 10 for every kind).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "orchestration/control/messages.hpp"

namespace tandem::control {

/// The first four bytes of every frame: "TNDM" read as a little-endian uint32.
inline constexpr std::uint32_t frame_magic = 0x4D444E54;
/// Bytes of the frame header (magic, version, kind, body length).
inline constexpr std::size_t header_bytes = 12;
/// The largest frame encode produces or decode accepts, unless a call gives its own limit. Sized
/// for a data-parallel rank's logprob_request (every frame stays below the uint32 body length).
/// The socket layer sets ZMQ_MAXMSGSIZE to it.
inline constexpr std::size_t max_frame_bytes = std::size_t{256} << 20;  // 256 MiB

/// The largest frame of one kind, below max_frame_bytes: the bulk kinds (requests and results
/// carrying tokens or logprobs) may use it all; the others are bounded by what they can
/// legitimately hold (a hello's strings, a heartbeat's two integers, an error's text, a recipe in
/// a welcome), so a peer cannot make a receiver hold a large frame of a small kind. Applied by
/// encode and decode on top of their `limit`.
std::size_t max_frame_bytes_of(message_kind kind);

/// What is wrong with a frame or a message.
enum class codec_errc {
  bad_magic,         ///< the first four bytes are not "TNDM"
  version_mismatch,  ///< the peer speaks another protocol version
  unknown_kind,      ///< a kind code outside 1 .. kind_count
  truncated,         ///< the frame ends before the header, the body, or a field does
  too_large,         ///< above the frame limit (encode or decode)
  bad_value,         ///< a bool other than 0 / 1, or an enum value outside its enum
  trailing_bytes,    ///< bytes after the body, or a body longer than its kind's fields
};

/// The name of an error code ("truncated").
std::string_view to_string(codec_errc code);

/// A refused frame or message.
struct codec_error {
  codec_errc code = codec_errc::truncated;
  std::size_t offset = 0;  ///< byte offset in the frame where the problem is (0 for encode)
  std::string text;        ///< a sentence naming the problem, the field and the offset
};

/// A value or the reason there is none. value() on an error is a programming error: it prints the
/// error and aborts.
template <class T>
class codec_result {
 public:
  codec_result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  codec_result(codec_error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& { return check(), *std::get_if<0>(&v_); }
  T& value() & { return check(), *std::get_if<0>(&v_); }
  T&& value() && { return check(), std::move(*std::get_if<0>(&v_)); }
  /// Precondition: !ok().
  const codec_error& error() const {
    if (ok()) {
      std::fputs("tandem::control::codec_result::error() called on a value\n", stderr);
      std::abort();
    }
    return *std::get_if<1>(&v_);
  }

 private:
  void check() const {
    if (!ok()) {
      std::fprintf(stderr, "tandem::control::codec_result::value() called on an error: %s\n",
                   std::get_if<1>(&v_)->text.c_str());
      std::abort();
    }
  }
  std::variant<T, codec_error> v_;
};

/// One encoded message.
using frame = std::vector<std::byte>;

namespace detail {
template <class M, class V>
struct is_alternative : std::false_type {};
template <class M, class... A>
struct is_alternative<M, std::variant<A...>> : std::bool_constant<(std::is_same_v<M, A> || ...)> {};
}  // namespace detail

/// One of the per-kind structs of messages.hpp.
template <class M>
concept message_struct = detail::is_alternative<M, message>::value;

/// The frame of `m`, or too_large when it would exceed `limit` bytes (nothing is allocated then).
template <message_struct M>
codec_result<frame> encode(const M& m, std::size_t limit = max_frame_bytes);
/// The frame of whichever message `m` holds.
codec_result<frame> encode(const message& m, std::size_t limit = max_frame_bytes);

/// The message in `bytes`, or why it is refused: frames above `limit`, bad magic, another
/// protocol version, an unknown kind, truncation anywhere, bad bool or enum values, trailing bytes.
codec_result<message> decode(std::span<const std::byte> bytes, std::size_t limit = max_frame_bytes);

}  // namespace tandem::control
