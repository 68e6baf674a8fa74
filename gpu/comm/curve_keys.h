// CurveZMQ key pairs as ZeroMQ takes them: 40-character Z85 text for each 32-byte Curve25519 key.
// The secret key never leaves the process that owns it except in a private hand-off (an inherited
// pipe, a 0600 file); logs name a key by its fingerprint, never the key itself.
#pragma once

#include <string>
#include <string_view>

#include "gpu/core/status.h"

namespace tandem::gpu {

/// One peer's long-term CURVE identity.
struct curve_keypair {
  std::string public_key;  ///< Z85, 40 characters
  std::string secret_key;  ///< Z85, 40 characters
  bool operator==(const curve_keypair&) const = default;
};

/// A fresh random key pair (libzmq's generator, backed by libsodium). Fails (unsupported) when
/// this libzmq was built without CURVE.
result<curve_keypair> make_curve_keypair();

/// The public key of a Z85 secret key; invalid_argument when `secret_z85` is not a Z85 key.
result<std::string> curve_public_key(std::string_view secret_z85);

/// True for exactly 40 characters of the Z85 alphabet.
bool is_curve_key(std::string_view z85);

/// The 32 key bytes of a Z85 key (precondition: is_curve_key).
std::string curve_key_bytes(std::string_view z85);
/// The Z85 text of 32 key bytes (precondition: 32 bytes).
std::string curve_key_text(std::string_view bytes);

/// A short name for logs: the first 8 characters of the Z85 public key.
std::string key_fingerprint(std::string_view public_z85);

}  // namespace tandem::gpu
