// Injected op failures, for the tests of every error path above the ops (the engines, the
// workers, the run): the N-th call of a named op fails before it runs with device_error
// "<op>: injected failure (call N)", as a device fault in that op would surface. Every op checks
// it where it checks its backend (dispatch.h), on every backend.
//
// Armed in a process by TANDEM_FAULT_OP=NAME[@N] (N-th call from the start of the process,
// 1-based, default 1), read at the first op call; or in-process by inject_op_failure. A failure
// fires once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/core/status.h"

namespace tandem::gpu::ops {

/// Arms the failure of the `nth` call of `op` counted from now (empty `op`: disarms).
void inject_op_failure(std::string op, std::int64_t nth = 1);

/// device_error "<op>: injected failure (call N)" when this call of `op` is the armed one, else ok.
status injected_failure(std::string_view op);

}  // namespace tandem::gpu::ops
