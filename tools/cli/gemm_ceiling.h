// The GEMM-only ceiling of a model step: every matrix product the step runs (each projection of
// the layout, experts at their share of the rows, and the tied head), back to back through the
// linear op on the step's device and dtype, each on weights of its own. A step can
// be no faster than its products; `tandem bench train` (forward and both gradients) and `tandem
// bench generate` (a decode step's forward) report their step as a fraction of it.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/model/config.h"
#include "gpu/model/layout.h"

namespace tandem::cli {

/// One matrix product of a step: rows × inner -> rows × outer.
struct gemm_shape {
  std::int64_t rows, inner, outer;
};

/// Every matrix product of a step over `rows` token rows: each 2-D projection of the layout
/// (embedding tables excluded: they are looked up), each expert at top_k / num_experts of the
/// rows, and the head over every row.
std::vector<gemm_shape> step_gemms(const gpu::model_config& c, const gpu::model_layout& layout, std::int64_t rows);

/// The seconds of those products run back to back, captured once and replayed (a CUDA graph on a
/// GPU: the device's time, not the host's enqueueing; median of 3 after a run that makes every
/// plan), operands in `type` on ctx.dev: the forward alone, or with `backward` the forward and
/// both gradients. ctx.scratch should be a workspace of its own (cuBLASLt's).
gpu::result<double> gemm_ceiling_seconds(const gpu::exec_context& ctx, gpu::dtype type, const std::vector<gemm_shape>& gemms,
                                         bool backward);

}  // namespace tandem::cli
