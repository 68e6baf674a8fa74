// tandem's actor-level error codes, usable as caf::error (category "tandem").
#pragma once

#include <cstdint>
#include <string>

#include <caf/error.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace tandem {

/// Why an actor request failed. Values are stable: they cross process boundaries in our codec.
enum class tandem_errc : std::uint8_t {
  wrong_state = 1,     ///< the request is illegal in the actor's current state (our EFSM)
  stale_version = 2,   ///< a reply or ack carried an older weight version than expected
  invalid_config = 3,  ///< a recipe or model configuration was refused
  engine_failure = 4,  ///< a compute engine call failed (CUDA, NCCL, I/O); its status is attached
  peer_lost = 5,       ///< a peer died or stopped answering: a member process that missed its heartbeats or exited, an actor that went down
  timeout = 6,         ///< a deadline on CAF's clock passed
};

/// "wrong_state", "stale_version", ...
std::string to_string(tandem_errc code);

}  // namespace tandem

CAF_ERROR_CODE_ENUM(tandem::tandem_errc, "tandem")
