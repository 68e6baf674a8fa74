// Where a run's device time goes, op by op, with no system profiler (the GPU machines have none
// that reports). While armed, every op's entry (ops/dispatch.h's on_backend) and the memory calls
// that enqueue device work (allocations, copies within the device and across the host boundary)
// mark the context's stream; the time from one mark to the next is charged to the first mark's name: its kernels and
// library calls, and any time the device sat idle waiting for the host to enqueue what followed.
// On CUDA a mark is an event recorded on the stream; on the CPU, where a call's work is done when
// it returns, it is the host's clock.
//
//   disarmed --op_profile_start()--> armed: marks kept --op_profile_stop(ctx)--> disarmed: table returned
//
// Marks of several streams interleave in host order, which is not the device's: profile one
// engine's stream at a time. Thread-safe; while disarmed a mark costs one atomic load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// One name's share: how often it was marked and the milliseconds charged to it.
struct op_time {
  std::string name;
  std::int64_t calls = 0;
  double ms = 0;
};

/// Arms the profile, dropping any marks of an earlier one.
void op_profile_start();
/// Whether a profile is armed (work captured for replay must not be: a replay marks nothing).
bool op_profile_armed();
/// Marks `name` on ctx's stream, while armed (else nothing).
void op_profile_mark(const exec_context& ctx, std::string_view name);
/// Marks the end on ctx's stream, waits for it, disarms, and returns the time charged to each
/// name, most first. The first failure (an event the device could not record or time) is
/// returned; the profile is disarmed either way.
result<std::vector<op_time>> op_profile_stop(const exec_context& ctx);

}  // namespace tandem::gpu
