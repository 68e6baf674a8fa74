// CPU kernels of the clipped policy-gradient loss (formulas and conventions: gpu/ops/pg_loss.h).
#pragma once

#include "gpu/ops/pg_loss.h"

namespace tandem::gpu::ops::cpu {

/// Writes *loss and metrics for tensors of element type T (float or double). Per-token math runs
/// in T, every sum in double, sequence by sequence in order (deterministic). Arguments, offsets
/// and mask values are checked by the caller.
template <class T>
void pg_loss_forward(const pg_loss_inputs& in, const pg_loss_settings& settings, T* loss, pg_loss_metrics& metrics);

/// d_lp_cur[t] = (or +=) dloss * d loss / d lp_cur[t]; sequences in parallel (OpenMP).
template <class T>
void pg_loss_backward(const pg_loss_inputs& in, const pg_loss_settings& settings, double dloss, T* d_lp_cur,
                      bool accumulate);

}  // namespace tandem::gpu::ops::cpu
