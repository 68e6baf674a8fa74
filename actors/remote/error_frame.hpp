// A failed request as it crosses processes: a tandem error becomes an error frame on the worker
// (its code, text, rank and the request that failed) and the same tandem error again in the
// controller's proxy, so the driver sees a remote failure exactly as a local one.
#pragma once

#include <cstdint>

#include <caf/error.hpp>

#include "orchestration/control/messages.hpp"

namespace tandem {

/// The error frame of a failed request of kind `request` on worker `rank` (an error of another
/// category than tandem's travels as engine_failure, its text kept).
control::error error_frame(const caf::error& e, std::int32_t rank, control::message_kind request);

/// The tandem error of an error frame (a code this build does not know becomes engine_failure).
caf::error error_of(const control::error& m);

}  // namespace tandem
