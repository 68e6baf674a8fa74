// CUDA kernels of the clipped policy-gradient loss (gpu/ops/pg_loss.h): float32 tensors only
// (`storage` must be float32; pg_loss.cpp refuses bfloat16 before dispatch), per-token math in
// float32 like the CPU float32 path, every sum in double. One block per sequence evaluates its
// tokens and writes its partial sums to the workspace; one block adds the sequences' partials in
// a fixed order (deterministic, no atomics on floating values).
//
// Values the host cannot see without a synchronisation (the offsets, the mask): the forward with
// `metrics` synchronises the context's stream anyway (the metrics are host values) and then
// reports through `bad_values` whether an offset or a mask value is invalid (the caller finds
// which on the host); without metrics, and in the backward, nothing synchronises and invalid
// values are not reported: offsets are clamped into [0, tokens] and non-decreasing per sequence
// (tokens outside every sequence are left as they are), and any non-zero mask value counts as 1.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/pg_loss.h"

namespace tandem::gpu::ops::cuda {

/// loss F32 [1] (written, on the device); metrics, unless null, overwritten (a synchronisation).
/// Needs a workspace.
status pg_loss_forward(const exec_context& ctx, dtype storage, const pg_loss_inputs& in, const pg_loss_settings& settings,
                       const tensor& loss, pg_loss_metrics* metrics, bool* bad_values);

/// d_lp_cur F32 [tokens] (= or += with accumulate).
status pg_loss_backward(const exec_context& ctx, dtype storage, const pg_loss_inputs& in, const pg_loss_settings& settings,
                        double dloss, const tensor& d_lp_cur, bool accumulate);

}  // namespace tandem::gpu::ops::cuda
