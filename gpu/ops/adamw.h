// AdamW, the optimizer step of training: bias-corrected first and second moments with decoupled
// weight decay (Loshchilov & Hutter), master weights and both moments stored in float32 or
// bfloat16 independently, and an optional copy of the updated weights for the compute path (the
// "model weights" that the forward pass and generation read).
#pragma once

#include <cstdint>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// Hyper-parameters of one AdamW step; names and meaning as torch.optim.AdamW.
struct adamw_hyper {
  double lr = 1e-3;            ///< learning rate; must be finite
  double beta1 = 0.9;          ///< first-moment decay, in [0, 1)
  double beta2 = 0.999;        ///< second-moment decay, in [0, 1)
  double eps = 1e-8;           ///< added to sqrt(v_hat); finite, >= 0
  double weight_decay = 0.01;  ///< decoupled decay factor (multiplied by lr); finite
  std::int64_t step = 1;       ///< 1-based index of this step (the caller counts); bias correction uses beta^step
  double grad_scale = 1;       ///< the gradient is multiplied by it first (gradient clipping's factor); finite, > 0
};

/// One AdamW step over one tensor (or one flat range of a slab). Per element, in this order:
///
///   g     = grad_scale * grad
///   m     = beta1 * m + (1 - beta1) * g
///   v     = beta2 * v + (1 - beta2) * (g * g)
///   m_hat = m / (1 - beta1^step)
///   v_hat = v / (1 - beta2^step)
///   p     = p * (1 - lr * weight_decay)                 decoupled decay first, as torch.optim.AdamW
///   p     = p - lr * (m_hat / (sqrt(v_hat) + eps))
///
/// which is p - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p) with p the old value. The
/// scalars (1 - beta), (1 - beta^step) and (1 - lr * weight_decay) are formed in double and then
/// rounded to the compute type. Compute type: float32, or double when grad is float64 (then param,
/// exp_avg and exp_avg_sq must be float64 too: the reference path).
///
/// Storage: every operand is loaded and widened to the compute type, updated, and rounded back to
/// its own dtype on store (bfloat16: round to nearest even, gpu/core/half.h). The parameter update
/// uses the freshly computed, not yet rounded m and v, so a bfloat16-moment run equals a float32
/// run whose stored moments are rounded to bfloat16 after every step. model_copy receives the
/// stored (already rounded) master value, converted to its own dtype (a float64 master goes
/// through float32 on its way to bfloat16).
///
/// All operands are contiguous with param's element count (shapes may differ), on one device.
///
/// @param param       F32 | BF16 (F64 on the reference path) [n]: master weights, updated in place
/// @param grad        F32 | BF16 | F64 [n]: the gradient (scaled by hyper.grad_scale here); a
///                    BF16 gradient (bfloat16 weights' own) is widened exactly to float32 first,
///                    so its step equals a float32 step on the widened values
/// @param exp_avg     F32 | BF16 (F64 on the reference path) [n]: first moment m, updated in place
/// @param exp_avg_sq  F32 | BF16 (F64 on the reference path) [n]: second moment v, updated in place
/// @param model_copy  F32 | BF16 (or F64 on the reference path) [n], or empty: written from param
/// On failure (a bad argument or device) nothing is written: every check precedes every store.
status adamw_step(const exec_context& ctx, const tensor& param, const tensor& grad, const tensor& exp_avg, const tensor& exp_avg_sq,
                  const adamw_hyper& hyper, const tensor& model_copy = tensor{});

}  // namespace tandem::gpu::ops
