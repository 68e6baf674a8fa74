// Turning engine statuses and callees' errors into tandem errors that say where they happened.
// Every error an actor replies with is a tandem_errc carrying one string that names the worker,
// the request and the reason ("rollout-1: bucket 3 of v2: device_error: ...").
#pragma once

#include <string>
#include <string_view>

#include <caf/error.hpp>

#include "actors/api/errors.hpp"
#include "gpu/core/status.h"

namespace tandem {

/// A tandem error with one string of context.
caf::error tandem_error(tandem_errc code, std::string text);

/// engine_failure "<where>: <status code>: <status message>".
caf::error engine_error(std::string_view where, const gpu::status& status);

/// The text of an error: a tandem error's own string, "request_timeout" for a CAF system error,
/// CAF's rendering otherwise.
std::string error_text(const caf::error& error);

/// `error` as seen from `where`: the same tandem code with "<where>: <text>"; a CAF request
/// timeout becomes timeout, a receiver gone becomes peer_lost; anything
/// else keeps its code and category with the context replaced by "<where>: <text>".
caf::error relay_error(const caf::error& error, std::string_view where);

/// True for a tandem error of this code.
bool is_tandem_error(const caf::error& error, tandem_errc code);

}  // namespace tandem
