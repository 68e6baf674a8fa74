// CPU kernel of the AdamW step (see gpu/ops/adamw.h for the formulas and storage rules).
#pragma once

#include "gpu/core/tensor.h"
#include "gpu/ops/adamw.h"

namespace tandem::gpu::ops::cpu {

/// Updates param, exp_avg, exp_avg_sq (and writes model_copy unless empty) computing in T (float
/// or double); storage dtypes are read from the views. Arguments are checked by the caller.
template <class T>
void adamw_step(const tensor& param, const tensor& grad, const tensor& exp_avg, const tensor& exp_avg_sq,
                const adamw_hyper& hyper, const tensor& model_copy);

}  // namespace tandem::gpu::ops::cpu
