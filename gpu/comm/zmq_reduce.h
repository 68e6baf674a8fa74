// Element-wise reduction steps of the ZeroMQ ring (zmq_group), on raw bytes of any alignment
// (message payloads are not aligned for the element type; loads and stores go through memcpy).
//
// A ring reduction of one element over ranks a, b, ..., z is the left fold
// ((x_a op x_b) op ...) op x_z: `start_partial` makes the partial from x_a, `add_to_partial`
// folds in each next rank's value, `finish_partial` folds in the last value and rounds to the
// element type. Partials travel in the accumulation type: float32 for bfloat16 and float16
// (accumulate in float32, round once, as local_group does), the element type otherwise; int32
// sums wrap modulo 2^32 (what local_group's int64 accumulation truncated to int32 gives).
// Max keeps the partial unless the next value is greater (NaN handling as local_group). uint8
// (opaque bytes) is not reduced: zmq_group refuses such a call before it reaches these steps,
// which leave their output untouched for it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/comm/communicator.h"
#include "gpu/core/dtype.h"

namespace tandem::gpu::zmq_reduce {

/// Bytes per element of a partial of `type` (4 for bfloat16/float16, else size_of(type)).
std::size_t partial_size_of(dtype type);

/// partial[i] = widen(mine[i]) for i < n.
void start_partial(dtype type, std::byte* partial, const std::byte* mine, std::int64_t n);

/// partial[i] = partial[i] op widen(mine[i]).
void add_to_partial(dtype type, reduce_op op, std::byte* partial, const std::byte* mine, std::int64_t n);

/// out[i] = narrow(partial[i] op widen(mine[i])); `out` may be `mine`.
void finish_partial(dtype type, reduce_op op, std::byte* out, const std::byte* partial, const std::byte* mine, std::int64_t n);

}  // namespace tandem::gpu::zmq_reduce
