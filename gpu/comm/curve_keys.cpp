// CurveZMQ key pairs (curve_keys.h): libzmq's key generator and Z85 codec.
#include "gpu/comm/curve_keys.h"

#include <zmq.hpp>

#include <array>

namespace tandem::gpu {

namespace {
constexpr std::size_t z85_length = 40;
constexpr std::string_view z85_alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
}  // namespace

result<curve_keypair> make_curve_keypair() {
  if (!zmq_has("curve"))
    return status{status_code::unsupported, "this libzmq was built without CURVE (libsodium): no CurveZMQ keys"};
  std::array<char, z85_length + 1> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0)
    return status{status_code::unsupported, std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno())};
  return curve_keypair{std::string(pub.data(), z85_length), std::string(sec.data(), z85_length)};
}

result<std::string> curve_public_key(std::string_view secret_z85) {
  if (!is_curve_key(secret_z85))
    return status{status_code::invalid_argument, "a CURVE secret key is 40 Z85 characters, got " +
                                                     std::to_string(secret_z85.size()) + " characters"};
  const std::string secret(secret_z85);
  std::array<char, z85_length + 1> pub{};
  if (zmq_curve_public(pub.data(), secret.c_str()) != 0)
    return status{status_code::unsupported, std::string("zmq_curve_public failed: ") + zmq_strerror(zmq_errno())};
  return std::string(pub.data(), z85_length);
}

bool is_curve_key(std::string_view z85) {
  if (z85.size() != z85_length) return false;
  for (const char c : z85)
    if (z85_alphabet.find(c) == std::string_view::npos) return false;
  return true;
}

std::string curve_key_bytes(std::string_view z85) {
  const std::string text(z85);
  std::array<std::uint8_t, 32> bytes{};
  zmq_z85_decode(bytes.data(), text.c_str());
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::string curve_key_text(std::string_view bytes) {
  std::array<char, z85_length + 1> text{};
  zmq_z85_encode(text.data(), reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return std::string(text.data(), z85_length);
}

std::string key_fingerprint(std::string_view public_z85) { return std::string(public_z85.substr(0, 8)); }

}  // namespace tandem::gpu
